//! `incremental-changes`: the change step of `bench/incremental.sh`, and the
//! slot dump it compares runs with.
//!
//! `change` picks a seeded share of the benchmark's products and changes one
//! comment of each, the kinds taking turns: a new comment and an edit through
//! the write path, a vote and an edit written the way the Java service wrote
//! them (the comment row put as it is, no compare-and-set), and a delete of the
//! product's best comment through the write path. It prints the changed
//! products, one per line. `slots` prints the rank slots of the products
//! listed on stdin as JSON lines, to compare an incremental run with a full one.

use std::io::BufRead;

use admin::demo;
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use common::config::HbaseArgs;
use common::model::{Comment, Extra, Order};
use common::store::{NewComment, Store};
use common::Id;
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::SeedableRng;

#[derive(Debug, Parser)]
#[command(name = "incremental-changes", about = "Change a share of the benchmark's products; dump rank slots.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Change one comment of each of a seeded share of the products.
    Change {
        /// Products in the data set (`demo load --products`).
        #[arg(long, default_value_t = 10_000)]
        products: u64,
        /// Share of the products to change.
        #[arg(long, default_value_t = 0.01)]
        share: f64,
        /// Seed of the choice.
        #[arg(long, default_value_t = 13)]
        seed: u64,
        /// Users in the data set (new comments are by existing users).
        #[arg(long, default_value_t = 100_000)]
        users: u64,
        #[command(flatten)]
        hbase: HbaseArgs,
    },
    /// Print the rank slots of the products on stdin (one id a line) as JSON lines.
    Slots {
        #[command(flatten)]
        hbase: HbaseArgs,
    },
}

/// The kinds of change, in turn.
const KINDS: [&str; 5] = ["new", "edit", "java-vote", "java-edit", "delete"];

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Change { products, share, seed, users, hbase } => {
            let store = hbase.store().context("configuring HBase access")?;
            let count = ((products as f64 * share).round() as usize).clamp(1, products as usize);
            let mut rng = StdRng::seed_from_u64(seed);
            let mut chosen: Vec<u64> =
                sample(&mut rng, products as usize, count).into_iter().map(|n| n as u64 + 1).collect();
            chosen.sort_unstable();
            let mut tally = [0usize; KINDS.len()];
            for (turn, number) in chosen.iter().enumerate() {
                let product = demo::product_id(*number)?;
                let kind = turn % KINDS.len();
                change(&store, &product, kind, turn as u64, users)
                    .await
                    .with_context(|| format!("{} on {product}", KINDS[kind]))?;
                tally[kind] += 1;
                println!("{product}");
            }
            let summary: Vec<String> = KINDS.iter().zip(tally).map(|(kind, count)| format!("{kind} {count}")).collect();
            eprintln!("changed {count} products: {}", summary.join(", "));
        }
        Command::Slots { hbase } => {
            let store = hbase.store().context("configuring HBase access")?;
            for line in std::io::stdin().lock().lines() {
                let product = Id::parse("productId", line?.trim())?;
                let slots = store.rank_slots(&product).await?;
                let slots: Vec<serde_json::Value> = slots
                    .iter()
                    .map(|slot| {
                        serde_json::json!({
                            "rank": slot.rank,
                            "comment": slot.comment.to_string(),
                            "score": slot.score,
                        })
                    })
                    .collect();
                println!("{}", serde_json::json!({ "product": product.to_string(), "slots": slots }));
            }
        }
    }
    Ok(())
}

/// One change of kind `kind` to `product`.
async fn change(store: &Store, product: &Id, kind: usize, turn: u64, users: u64) -> Result<()> {
    let page = store.product_comment_page(product, None, 20).await?;
    let comments = store.comments_of(&page).await?;
    let first: Option<&Comment> = comments.first();
    match KINDS[kind] {
        "new" => {
            let user = demo::user_id(turn % users + 1)?;
            let order =
                Order { id: Id::parse_new("orderId", &format!("X{turn:09}"))?, user_id: user, extra: Extra::new() };
            store.put_records(std::slice::from_ref(&order)).await?;
            store
                .post_comment(NewComment {
                    order_id: order.id,
                    product_id: *product,
                    user_id: user,
                    content: format!(
                        "A new review written for the incremental benchmark, number {turn}, long enough to rank well"
                    ),
                    timestamp_ms: 1_793_400_000_000,
                    rating: Some(5),
                    helpful: Some(50),
                    unhelpful: Some(1),
                    photos: Some(2),
                })
                .await?;
        }
        "edit" => {
            let comment = first.context("the product has no comment")?;
            let content =
                format!("{} (edited for the incremental benchmark)", comment.content.as_deref().unwrap_or_default());
            store.edit_comment(&comment.order_id, product, content).await?;
        }
        "java-vote" => {
            let mut comment = first.context("the product has no comment")?.clone();
            comment.helpful = Some(comment.helpful.unwrap_or(0) + 25);
            store.put_records(&[comment]).await?;
        }
        "java-edit" => {
            let mut comment = first.context("the product has no comment")?.clone();
            comment.content =
                Some(format!("{} (edited by the Java service)", comment.content.as_deref().unwrap_or_default()));
            comment.edited = true;
            store.put_records(&[comment]).await?;
        }
        _ => {
            // The best comment, so the delete changes the ten best.
            let slots = store.rank_slots(product).await?;
            let best = slots.first().context("the product has no rank slot")?;
            store.delete_comment(&best.comment.order_id(), product).await?;
        }
    }
    Ok(())
}
