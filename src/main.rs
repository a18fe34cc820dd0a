//! The `postfach` command line: see docs/cli.md for its contract.

use clap::Parser;

mod cli;

use cli::{Cli, run};

/// The binary's allocator: see the feature `mimalloc` in Cargo.toml.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("POSTFACH_LOG").unwrap_or_else(|_| {
        // a server reports its alarms and recoveries; one-shot commands stay quiet
        let level = if matches!(cli.command, cli::Command::Run(_)) {
            "info"
        } else {
            "warn"
        };
        level.into()
    });
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // spans are for the trace exporter only: the log reads the same either way
    let filter = filter.add_directive(
        format!("{}=off", postfach::trace::TARGET)
            .parse()
            .expect("a valid directive"),
    );
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match cli.log_format {
        cli::LogFormat::Json => logs.json().with_filter(filter).boxed(),
        cli::LogFormat::Human => logs.with_filter(filter).boxed(),
    };
    #[cfg(feature = "otlp")]
    let otlp = if cli::traces_wanted(&cli) {
        match postfach::server::otlp::Otlp::from_settings(cli::otlp_endpoint(&cli).as_deref()) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("postfach: {e}");
                std::process::exit(2);
            }
        }
    } else {
        None
    };
    #[cfg(feature = "otlp")]
    let traces = otlp.as_ref().map(|o| o.layer());
    #[cfg(not(feature = "otlp"))]
    let traces: Option<tracing_subscriber::layer::Identity> = None;
    tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .init();
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
    let outcome = runtime.block_on(run(cli));
    // what the exporter still holds goes out before the process ends
    #[cfg(feature = "otlp")]
    if let Some(o) = &otlp {
        o.shutdown();
    }
    match outcome {
        Ok(output) if output.json.is_null() && output.text.is_empty() => {}
        Ok(output) => {
            if json {
                print_out(&output.json.to_string());
            } else {
                print_out(&output.text);
            }
        }
        Err(f) => {
            if json && let Some(doc) = &f.json {
                print_out(&doc.to_string());
            }
            eprintln!("postfach: {}", f.message);
            std::process::exit(f.code);
        }
    }
}

/// Prints the result on stdout; a reader that went away (`postfach instances |
/// head`) ends the output quietly rather than with a panic.
fn print_out(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|()| out.flush());
}
