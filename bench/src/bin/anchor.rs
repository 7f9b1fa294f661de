//! `anchor`: the floor `api-bench` and `bench/wrk-ab.sh` measure the cached
//! reads against: [`bench::anchor_router`] over HTTP on tokio, answering
//! `GET /anchor` with the bytes of a file (a ranked answer).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use axum::body::Bytes;
use clap::Parser;

/// Flags of the anchor.
#[derive(Debug, Parser)]
#[command(name = "anchor", about = "Answers fixed bytes over HTTP: the floor of api-bench's cached reads.")]
struct AnchorArgs {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: SocketAddr,

    /// The file whose bytes every answer carries, as JSON.
    #[arg(long)]
    body: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = AnchorArgs::parse();
    let body = Bytes::from(std::fs::read(&args.body).with_context(|| format!("cannot read {}", args.body.display()))?);
    let app = bench::anchor_router(body);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    axum::serve(listener, app).await.context("serving")
}
