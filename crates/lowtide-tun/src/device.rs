//! TODO(device)
