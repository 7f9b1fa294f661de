//! ranker (skeleton)
