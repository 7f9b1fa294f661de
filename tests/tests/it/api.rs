//! Integration tests: api (to be written).
