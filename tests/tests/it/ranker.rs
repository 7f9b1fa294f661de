//! Integration tests: ranker (to be written).
