//! tests (skeleton)
