//! Reads for batch jobs that visit every product (the ranker): listing the
//! products present in an index table, and paging through one product's
//! comment index while counting the rows that had to be skipped.
//!
//! HBase cannot list distinct key prefixes, so listing walks the table: it
//! reads a page of rows, collects the product ids at their front and, when the
//! page is full, jumps past the last product's remaining rows by resuming at
//! the successor of its id. A product with a million index rows therefore costs
//! one short read, and a long tail of small products is read a page at a time.
//! A page that holds the whole index of a small product hands it over with the
//! product ([`ListedProduct::whole_index`]), so ranking it needs no index read
//! of its own.

use super::{index_entry, skip_row, IndexEntry, IndexKind, SkipReason, Store};
use crate::error::Result;
use crate::hbase::{Retry, Row, ScanSpec, COLUMN_STARS, COLUMN_VALUE};
use crate::ids::{Id, ID_LEN};
use crate::keys;

/// An index table keyed by product id first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProductIndex {
    /// `product-comment`: products that have comments. Listing skips each
    /// product's rows after the first page that reaches them.
    Comments,
    /// `product-comment-rank`: products that have rank slots. Listing reads
    /// every row (at most ten per product) and notes which slots each product has.
    RankSlots,
}

/// One product found by a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedProduct {
    /// The product.
    pub product: Id,
    /// The rank slots seen in this listing: bit `r - 1` is set when slot `r`
    /// exists (always 0 for [`ProductIndex::Comments`]).
    pub slot_mask: u16,
    /// For [`ProductIndex::Comments`]: the product's whole comment index (as
    /// [`Store::product_comment_page_counted`] would read it, with no next
    /// page) when the listing page held all of it; `None` when its rows may go
    /// on past the page, and always for [`ProductIndex::RankSlots`].
    ///
    /// Small products are most of a shop's products and most of a ranking
    /// run's calls: with their index from the listing, ranking one costs a
    /// multi-get instead of an index scan and a multi-get.
    pub whole_index: Option<CountedIndexPage>,
}

/// A page of a product listing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProductListing {
    /// Products in key order. For [`ProductIndex::RankSlots`] the last product
    /// of one page may continue on the next: callers merge equal neighbours.
    /// For [`ProductIndex::Comments`] a product is on one page only.
    pub products: Vec<ListedProduct>,
    /// Where the next page starts; `None` when the range is exhausted.
    pub next: Option<Vec<u8>>,
}

/// A page of one product's comment index, with the rows that were skipped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CountedIndexPage {
    /// The usable entries, in key order (newest first).
    pub entries: Vec<IndexEntry>,
    /// Index rows in the page that were skipped (bad key layout or value).
    pub skipped: u64,
    /// The key of the first row after this page, if there is one.
    pub next: Option<Vec<u8>>,
}

impl Store {
    /// Lists the products with rows in `index` within `[start, stop)`, reading
    /// at most `rows` rows. Keys whose first ten bytes are not an id are skipped and counted.
    pub async fn list_products(
        &self,
        index: ProductIndex,
        start: Vec<u8>,
        stop: Option<Vec<u8>>,
        rows: usize,
    ) -> Result<ProductListing> {
        let table = match index {
            ProductIndex::Comments => self.tables().product_comment.clone(),
            ProductIndex::RankSlots => self.tables().product_comment_rank.clone(),
        };
        let rows = rows.max(1);
        let mut spec = ScanSpec::batch_page(start.clone(), stop.clone(), rows);
        if index == ProductIndex::Comments {
            // A small product's whole index comes from this page: with its star
            // marks, so the ranker can tell which marks to fix.
            spec.columns.push(COLUMN_STARS.to_vec());
        }
        let page = {
            let table = table.clone();
            self.hbase().run(Retry::Idempotent, move |connection| connection.scan(&table, &spec)).await?
        };
        let mut listing = ProductListing::default();
        // Per listed product, the page's rows that start with its id.
        let mut product_rows: Vec<std::ops::Range<usize>> = Vec::new();
        for (position, row) in page.iter().enumerate() {
            let Some(product) = keys::leading_id("productId", &row.key) else {
                skip_row(
                    self.tables(),
                    &table,
                    if keys::leading_id_is_multibyte(&row.key) { SkipReason::MultibyteId } else { SkipReason::BadKey },
                    &row.key,
                    &"the key does not start with a product id",
                );
                continue;
            };
            let slot = match index {
                ProductIndex::RankSlots => keys::parse_rank_key(&row.key).map_or(0, |slot| 1 << (slot.rank - 1)),
                ProductIndex::Comments => 0,
            };
            match (listing.products.last_mut(), product_rows.last_mut()) {
                (Some(last), Some(rows)) if last.product == product => {
                    last.slot_mask |= slot;
                    rows.end = position + 1;
                }
                _ => {
                    listing.products.push(ListedProduct { product, slot_mask: slot, whole_index: None });
                    product_rows.push(position..position + 1);
                }
            }
        }
        if index == ProductIndex::Comments {
            let read = ReadSpan {
                start: &start,
                stop: stop.as_deref(),
                last: page.last().map(|row| row.key.as_slice()),
                full: page.len() == rows,
            };
            for (listed, rows) in listing.products.iter_mut().zip(product_rows.iter().cloned()) {
                listed.whole_index = self.whole_index(&table, &listed.product, &page[rows], &read);
            }
        }
        if page.len() == rows {
            let last_rows = product_rows.last().cloned();
            let resume = match (index, listing.products.last(), last_rows) {
                // The page ends inside the last product's index. When other
                // rows came before it in the page, it is left to the next
                // page, which starts at its id and so holds all of it if it is
                // smaller than a page: every small product comes out whole, for
                // a few rows read twice. A product that fills a page from its
                // start is big; it is listed, and the rest of its rows skipped.
                (ProductIndex::Comments, Some(last), Some(rows))
                    if rows.start > 0 && rows.end == page.len() && last.whole_index.is_none() =>
                {
                    let resume = last.product.as_bytes().to_vec();
                    listing.products.pop();
                    Some(resume)
                }
                _ => page.last().and_then(|last| resume_after(index, last)),
            };
            listing.next = resume.filter(|next| stop.as_ref().is_none_or(|stop| next < stop));
        }
        Ok(listing)
    }

    /// `product`'s whole comment index from the listing rows that start with
    /// its id, when the page read all of its key prefix; `None` otherwise.
    /// Rows that start with the id but lie outside the prefix are not its
    /// index (a product's index read never sees them) and are left out.
    fn whole_index(&self, table: &str, product: &Id, rows: &[Row], read: &ReadSpan<'_>) -> Option<CountedIndexPage> {
        let prefix = keys::product_comment_prefix(product);
        if !read.covers(&prefix, keys::prefix_successor(&prefix).as_deref()) {
            return None;
        }
        let in_prefix: Vec<&Row> = rows.iter().filter(|row| row.key.starts_with(&prefix)).collect();
        let entries: Vec<IndexEntry> =
            in_prefix.iter().filter_map(|row| index_entry(self.tables(), table, IndexKind::Product, row)).collect();
        let skipped = (in_prefix.len() - entries.len()) as u64;
        Some(CountedIndexPage { entries, skipped, next: None })
    }

    /// Reads up to `limit` entries of `product`'s comment index from `start`
    /// (the prefix's first row when `None`), counting the rows it skips.
    pub async fn product_comment_page_counted(
        &self,
        product: &Id,
        start: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<CountedIndexPage> {
        let table = self.tables().product_comment.clone();
        let prefix = keys::product_comment_prefix(product);
        let limit = limit.max(1);
        let spec = ScanSpec {
            start: start.unwrap_or_else(|| prefix.clone()),
            stop: keys::prefix_successor(&prefix),
            // One row more than asked: its key is where the next page starts.
            limit: limit + 1,
            page_size: limit + 1,
            // The star mark too, so the ranker can tell which marks to fix.
            columns: vec![COLUMN_VALUE.to_vec(), COLUMN_STARS.to_vec()],
            // Cached, unlike the listing: a product's index is read in many short
            // scans (a scanner per page), and a block read without the cache is
            // not kept, so the next page's scanner would read and decompress it
            // from the store files again, slowing the readers beside the run.
            cache_blocks: true,
        };
        let mut rows = {
            let table = table.clone();
            self.hbase().run(Retry::Idempotent, move |connection| connection.scan(&table, &spec)).await?
        };
        let next = (rows.len() > limit).then(|| rows.swap_remove(limit).key);
        rows.truncate(limit);
        let entries: Vec<IndexEntry> =
            rows.iter().filter_map(|row| index_entry(self.tables(), &table, IndexKind::Product, row)).collect();
        let skipped = (rows.len() - entries.len()) as u64;
        Ok(CountedIndexPage { entries, skipped, next })
    }
}

/// The keys one listing page read: every key of `[start, stop)` when the
/// page was not full, else every key from `start` through `last`.
struct ReadSpan<'a> {
    start: &'a [u8],
    stop: Option<&'a [u8]>,
    last: Option<&'a [u8]>,
    full: bool,
}

impl ReadSpan<'_> {
    /// Whether the page read every key of `[from, until)` (`until: None`: to
    /// the end of the table).
    fn covers(&self, from: &[u8], until: Option<&[u8]>) -> bool {
        if self.start > from {
            return false;
        }
        match (self.full, until) {
            // A full page read through its last key: everything before a key
            // past it was read.
            (true, Some(until)) => self.last.is_some_and(|last| last >= until),
            (true, None) => false,
            (false, Some(until)) => self.stop.is_none_or(|stop| stop >= until),
            (false, None) => self.stop.is_none(),
        }
    }
}

/// Where a listing resumes after a full page ending at `last`.
fn resume_after(index: ProductIndex, last: &Row) -> Option<Vec<u8>> {
    match index {
        // Jump over the rest of the last product's rows (or of the ten bytes
        // that are not an id: no valid product can start with them either).
        ProductIndex::Comments if last.key.len() >= ID_LEN => keys::next_leading_id(&last.key),
        _ => Some(keys::key_successor(&last.key)),
    }
}

#[cfg(test)]
mod tests {
    use super::ReadSpan;

    #[test]
    fn a_span_covers_a_range_only_when_it_read_every_key_of_it() {
        let full = ReadSpan { start: b"b", stop: None, last: Some(b"d5"), full: true };
        assert!(full.covers(b"b", Some(b"c")), "read from b through d5");
        assert!(full.covers(b"c", Some(b"d5")), "until is exclusive");
        assert!(!full.covers(b"c", Some(b"d6")), "d5..d6 may hold keys the page did not reach");
        assert!(!full.covers(b"a", Some(b"c")), "a..b was not read");
        assert!(!full.covers(b"c", None), "a full page never reads to the end of the table");

        let to_stop = ReadSpan { start: b"b", stop: Some(b"m"), last: Some(b"d5"), full: false };
        assert!(to_stop.covers(b"c", Some(b"m")), "a page short of its limit read up to the stop");
        assert!(!to_stop.covers(b"c", Some(b"n")), "m..n lies past the stop");
        assert!(!to_stop.covers(b"c", None));

        let to_end = ReadSpan { start: b"b", stop: None, last: None, full: false };
        assert!(to_end.covers(b"x", None), "an empty page with no stop read to the end");
        assert!(to_end.covers(b"b", Some(b"z")));
    }
}
