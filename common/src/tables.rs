//! Table names, with the optional prefix that lets tests and tenants share one HBase.

use crate::error::{Error, Result};

/// The full names of every table, prefix applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables {
    /// The prefix in front of every name (may be empty).
    pub prefix: String,
    /// `user`: id → User JSON.
    pub user: String,
    /// `seller`: id → Seller JSON.
    pub seller: String,
    /// `product`: id → Product JSON.
    pub product: String,
    /// `order`: id → Order JSON.
    pub order: String,
    /// `comment`: orderId productId → Comment JSON.
    pub comment: String,
    /// `user-comment`: a user's comments, newest first.
    pub user_comment: String,
    /// `product-comment`: a product's comments, newest first.
    pub product_comment: String,
    /// `product-comment-rank`: a product's ten best comments.
    pub product_comment_rank: String,
    /// `ranker-run`: the history of ranking runs.
    pub ranker_run: String,
    /// `ranker-lease`: the lease that lets one scheduler run a night's ranking.
    pub ranker_lease: String,
}

impl Tables {
    /// Names every table with `prefix` in front. A prefix may hold only the
    /// characters HBase allows in a table name (letters, digits, `_`, `-`, `.`).
    pub fn with_prefix(prefix: &str) -> Result<Tables> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if prefix.len() > 64 || !prefix.chars().all(allowed) || prefix.starts_with(['.', '-']) {
            return Err(Error::InvalidInput(format!(
                "table prefix {prefix:?} may hold only letters, digits, '_', '-' and '.', and must not start with '.' or '-'"
            )));
        }
        let name = |table: &str| format!("{prefix}{table}");
        Ok(Tables {
            prefix: prefix.to_owned(),
            user: name("user"),
            seller: name("seller"),
            product: name("product"),
            order: name("order"),
            comment: name("comment"),
            user_comment: name("user-comment"),
            product_comment: name("product-comment"),
            product_comment_rank: name("product-comment-rank"),
            ranker_run: name("ranker-run"),
            ranker_lease: name("ranker-lease"),
        })
    }

    /// A full table name without the prefix (`product-comment-rank`), for
    /// metric labels that must not depend on the deployment; a name without
    /// the prefix is returned as it is.
    pub fn unprefixed<'name>(&self, table: &'name str) -> &'name str {
        table.strip_prefix(self.prefix.as_str()).unwrap_or(table)
    }

    /// Every table, in creation order.
    pub fn all(&self) -> [&str; 10] {
        [
            &self.user,
            &self.seller,
            &self.product,
            &self.order,
            &self.comment,
            &self.user_comment,
            &self.product_comment,
            &self.product_comment_rank,
            &self.ranker_run,
            &self.ranker_lease,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applies_the_prefix_to_every_table_and_refuses_bad_prefixes() {
        let tables = Tables::with_prefix("t1_").expect("valid prefix");
        assert_eq!(tables.product_comment_rank, "t1_product-comment-rank");
        assert!(tables.all().iter().all(|name| name.starts_with("t1_")));
        assert_eq!(Tables::with_prefix("").expect("empty prefix").user, "user");
        for bad in ["a b", "a:b", "-x", "ü", "a/b"] {
            assert!(Tables::with_prefix(bad).is_err(), "{bad}");
        }
    }
}
