//! Integration tests: reliability (to be written).
