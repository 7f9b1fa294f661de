//! query-api (skeleton)
