//! TODO(vnet)
