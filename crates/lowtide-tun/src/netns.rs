//! TODO(netns)
