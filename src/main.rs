//! The `postfach` command line: see docs/cli.md for its contract.

use clap::Parser;

mod cli;

use cli::{Cli, run};

fn main() {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("POSTFACH_LOG").unwrap_or_else(|_| {
        // a server reports its alarms and recoveries; one-shot commands stay quiet
        let level = if matches!(cli.command, cli::Command::Run { .. }) {
            "info"
        } else {
            "warn"
        };
        level.into()
    });
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        cli::LogFormat::Json => logs.json().init(),
        cli::LogFormat::Human => logs.init(),
    }
    // a damaged database file makes redb panic: one line naming it, exit 1
    postfach::install_damage_hook(cli.db.clone(), cli::DAMAGED_ADVICE);
    let json = cli.json;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("postfach: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(output) if output.json.is_null() && output.text.is_empty() => {}
        Ok(output) => {
            if json {
                println!("{}", output.json);
            } else {
                println!("{}", output.text);
            }
        }
        Err(f) => {
            if json && let Some(doc) = &f.json {
                println!("{doc}");
            }
            eprintln!("postfach: {}", f.message);
            std::process::exit(f.code);
        }
    }
}
