//! The `agentry` binary: parse the command line and run it.

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = agentry::cli::Cli::parse();
    std::process::exit(agentry::cli::run(cli).await);
}
