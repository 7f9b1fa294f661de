//! The Thrift2 gateway's operations against the real HBase: time-range scans
//! (which rows, which cells, page by page, keys only or chosen columns) and
//! tables created with split keys (their regions, as Thrift1 reports them).

use std::ops::Range;
use std::time::Duration;

use common::hbase::{
    GatewayList, Hbase, HbaseConfig, RangeScan, Region, Retry, ScanCells, TimedRow, COLUMN_SCORE, COLUMN_VALUE,
};
use common::store::Store;
use common::Error;
use integration_tests::app::closed_address;
use integration_tests::{fresh_store, hbase_config, thrift_addr, unique_prefix};

/// A fixed past instant (2023-11-14T22:13:20Z), far from the server's clock,
/// so no cell written by HBase itself can fall into the ranges tested.
const BASE: i64 = 1_700_000_000_000;

/// Writes `cells` into row `key` of `table`, stamped `timestamp`.
async fn put_at(store: &Store, table: &str, key: &str, cells: Vec<(&[u8], &str)>, timestamp: i64) {
    let (table, key) = (table.to_owned(), key.as_bytes().to_vec());
    let cells: Vec<(Vec<u8>, Vec<u8>)> =
        cells.into_iter().map(|(column, value)| (column.to_vec(), value.as_bytes().to_vec())).collect();
    store
        .hbase()
        .run(Retry::Idempotent, move |connection| connection.put_at(&table, &key, cells.clone(), timestamp))
        .await
        .expect("put a cell at a chosen time");
}

/// Every page of `scan`, checking that no page is longer than asked.
async fn scan_all(hbase: &Hbase, table: &str, scan: RangeScan) -> Vec<TimedRow> {
    let page_size = scan.page_size;
    let mut scanner = hbase.range_scanner(table, scan).expect("a valid scan");
    let mut rows = Vec::new();
    while let Some(page) = scanner.next_page().await.expect("a page") {
        assert!(!page.is_empty() && page.len() <= page_size, "page of {} rows for pages of {page_size}", page.len());
        rows.extend(page);
    }
    rows
}

fn keys(rows: &[TimedRow]) -> Vec<String> {
    rows.iter().map(|row| String::from_utf8_lossy(&row.key).into_owned()).collect()
}

/// Rows r00..r09 with one cell each, row i written at BASE + i s; r10 with an
/// old `cf:q` and a `cf:s` written at BASE + 5.5 s; r11 with cells before and
/// after the range tested, none in it.
async fn write_timed_rows(store: &Store, table: &str) {
    for i in 0..10 {
        put_at(store, table, &format!("r{i:02}"), vec![(COLUMN_VALUE, "v")], BASE + i * 1_000).await;
    }
    put_at(store, table, "r10", vec![(COLUMN_VALUE, "old")], BASE).await;
    put_at(store, table, "r10", vec![(COLUMN_SCORE, "new")], BASE + 5_500).await;
    put_at(store, table, "r11", vec![(COLUMN_VALUE, "before")], BASE + 1_000).await;
    put_at(store, table, "r11", vec![(COLUMN_SCORE, "after")], BASE + 9_000).await;
}

#[tokio::test]
async fn a_time_range_scan_returns_exactly_the_rows_with_a_cell_written_in_the_range() {
    let store = fresh_store("thrift2_time_range").await;
    let table = store.tables().comment.clone();
    write_timed_rows(&store, &table).await;
    let hbase = store.hbase();
    // [BASE + 3 s, BASE + 7 s): the start is in, the end is out.
    let in_range = BASE + 3_000..BASE + 7_000;
    let range_scan = |cells| RangeScan {
        time_range: Some(in_range.clone()),
        page_size: 2,
        cells,
        ..RangeScan::new(Vec::new(), None)
    };

    let everything = scan_all(hbase, &table, RangeScan { page_size: 5, ..RangeScan::new(Vec::new(), None) }).await;
    assert_eq!(everything.len(), 12, "{:?}", keys(&everything));

    let rows = scan_all(hbase, &table, range_scan(ScanCells::All)).await;
    assert_eq!(keys(&rows), ["r03", "r04", "r05", "r06", "r10"]);
    for row in &rows {
        assert!(row.cells.iter().all(|cell| in_range.contains(&cell.timestamp)), "{row:?}");
    }
    // Of r10 only the cell written in the range, with its value and time.
    let r10 = rows.last().expect("r10");
    assert_eq!(r10.cells.len(), 1, "{r10:?}");
    assert_eq!((r10.cells[0].column.as_slice(), r10.cells[0].value.as_slice()), (COLUMN_SCORE, b"new".as_slice()));
    assert_eq!(r10.cells[0].timestamp, BASE + 5_500);
    assert_eq!(rows[0].cells[0].timestamp, BASE + 3_000);
    assert_eq!(rows[0].cells[0].value, b"v");

    // Keys only: the same rows, one cell each, the time kept and the value dropped.
    let rows = scan_all(hbase, &table, range_scan(ScanCells::KeysOnly)).await;
    assert_eq!(keys(&rows), ["r03", "r04", "r05", "r06", "r10"]);
    for row in &rows {
        assert_eq!(row.cells.len(), 1, "{row:?}");
        assert!(row.cells[0].value.is_empty() && in_range.contains(&row.cells[0].timestamp), "{row:?}");
    }

    // Chosen columns: r10 changed only a column not asked for.
    let rows = scan_all(hbase, &table, range_scan(ScanCells::Columns(vec![COLUMN_VALUE.to_vec()]))).await;
    assert_eq!(keys(&rows), ["r03", "r04", "r05", "r06"]);

    // The key range bounds it too: [r04, r06).
    let rows = scan_all(
        hbase,
        &table,
        RangeScan { start: b"r04".to_vec(), stop: Some(b"r06".to_vec()), ..range_scan(ScanCells::All) },
    )
    .await;
    assert_eq!(keys(&rows), ["r04", "r05"]);

    // A range in which nothing was written, and an empty range.
    let nothing = RangeScan { time_range: Some(BASE + 20_000..BASE + 30_000), ..range_scan(ScanCells::All) };
    assert!(scan_all(hbase, &table, nothing).await.is_empty());
    let empty = RangeScan { time_range: Some(BASE + 4_000..BASE + 4_000), ..range_scan(ScanCells::All) };
    assert!(scan_all(hbase, &table, empty).await.is_empty());

    // A range ending before it starts is the caller's mistake, refused before any I/O.
    let backwards =
        RangeScan { time_range: Some(Range { start: BASE + 7_000, end: BASE + 3_000 }), ..range_scan(ScanCells::All) };
    assert!(matches!(hbase.range_scanner(&table, backwards), Err(Error::InvalidInput(_))));
}

#[tokio::test]
async fn a_scan_of_a_missing_table_is_not_found() {
    let hbase = Hbase::new(hbase_config(&thrift_addr()));
    let mut scanner =
        hbase.range_scanner("no_such_table_thrift2", RangeScan::new(Vec::new(), None)).expect("a valid scan");
    let outcome = scanner.next_page().await;
    assert!(matches!(outcome, Err(Error::NotFound(_))), "{outcome:?}");
}

#[tokio::test]
async fn a_table_created_with_split_keys_has_those_regions_and_scans_across_them() {
    let hbase = Hbase::new(hbase_config(&thrift_addr()));
    let table = format!("{}split", unique_prefix("thrift2_split"));
    let splits: Vec<Vec<u8>> = ["4", "8", "c"].iter().map(|key| key.as_bytes().to_vec()).collect();
    hbase.create_table_with_splits(&table, "cf", splits.clone(), 1).await.expect("create a pre-split table");

    let name = table.clone();
    let regions: Vec<Region> =
        hbase.run(Retry::Idempotent, move |connection| connection.table_regions(&name)).await.expect("regions");
    let starts: Vec<&[u8]> = regions.iter().map(|region| region.start_key.as_slice()).collect();
    let ends: Vec<&[u8]> = regions.iter().map(|region| region.end_key.as_slice()).collect();
    assert_eq!(starts, [b"".as_slice(), b"4", b"8", b"c"]);
    assert_eq!(ends, [b"4".as_slice(), b"8", b"c", b""]);

    // Rows in every region come back in key order, pages spanning regions.
    let store = Store::new(hbase.clone(), common::tables::Tables::with_prefix("unused_").expect("prefix"));
    let written: Vec<String> = ["0a", "3z", "4", "5", "7~", "8", "b", "c", "c0", "zz"].map(str::to_owned).to_vec();
    for key in &written {
        put_at(&store, &table, key, vec![(COLUMN_VALUE, key)], BASE).await;
    }
    let rows = scan_all(&hbase, &table, RangeScan { page_size: 3, ..RangeScan::new(Vec::new(), None) }).await;
    assert_eq!(keys(&rows), written);

    // The table exists now: a second creation is a conflict, not a silent success.
    let again = hbase.create_table_with_splits(&table, "cf", splits, 1).await;
    assert!(matches!(again, Err(Error::Conflict(_))), "{again:?}");
    hbase.run(Retry::Idempotent, move |connection| connection.drop_table(&table)).await.expect("drop the table");
}

#[tokio::test]
async fn the_thrift2_pool_connects_only_when_used() {
    // No Thrift2 gateway where this pool looks for one: Thrift1 work is unaffected,
    // and a Thrift2 operation reports the gateway unavailable.
    let hbase = Hbase::new(HbaseConfig {
        thrift2_gateways: GatewayList::single(closed_address()),
        // The pool retries a refused connection until the deadline.
        operation_timeout: Duration::from_secs(3),
        ..hbase_config(&thrift_addr())
    });
    hbase.check_ready().await.expect("Thrift1 works without a Thrift2 gateway");
    let mut scanner = hbase.range_scanner("any", RangeScan::new(Vec::new(), None)).expect("a valid scan");
    let outcome = scanner.next_page().await;
    // Refused connections, or (on a loaded machine) the deadline passing
    // while the pool retries them: either way the gateway is unavailable.
    assert!(matches!(&outcome, Err(Error::Unavailable(_))), "{outcome:?}");
}
