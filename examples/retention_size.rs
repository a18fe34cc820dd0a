//! File size per completed instances before and after retention cleanup and
//! compaction. `cargo run --release --example retention_size -- 1000000`
//!
//! Run from the project's directory, it keeps its figures as
//! `bench-results/retention.json` (the README renders them).
use postfach::{JobContext, ManualClock, Options, Postfach, Publish, Vars, vars};
use std::time::{Duration, Instant};

/// The binary's allocator (feature `mimalloc`, on by default), so the run
/// is timed as `postfach` runs.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const REFERENCE: &str = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");

fn size(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// The bytes the file's blocks take on the disk (`du`), where the file
/// system says: redb grows its file ahead of use (doubling it while it is
/// small) and leaves what it has not written yet unallocated.
#[cfg(unix)]
fn on_disk(p: &std::path::Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| m.blocks() * 512)
}
#[cfg(not(unix))]
fn on_disk(_: &std::path::Path) -> Option<u64> {
    None
}

#[tokio::main(worker_threads = 2)]
async fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    std::fs::create_dir_all("target/bench-db").unwrap();
    let dir = tempfile::tempdir_in("target/bench-db").unwrap();
    let path = dir.path().join("size.redb");
    let clock = ManualClock::new(1_767_225_600_000);
    let open = || {
        Postfach::open_with(
            &path,
            Options {
                clock: clock.clone(),
                ..Options::default()
            },
        )
        .unwrap()
    };
    let pf = open();
    pf.deploy(
        "a.bpmn",
        REFERENCE,
        [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into(),
    )
    .await
    .unwrap();
    // the hand-over: a real host sends the order to the provider here
    pf.register_handler("auftragUebergeben", |_job: JobContext| async move {
        Ok(Vars::new())
    });
    pf.register_handler("rechnungStellen", |_j: JobContext| async move {
        Ok(Vars::new())
    });
    let t = Instant::now();
    let chunk = 10_000u64;
    let mut done = 0;
    while done < n {
        let c = chunk.min(n - done);
        let mut set = tokio::task::JoinSet::new();
        for i in done..done + c {
            let pf = pf.clone();
            set.spawn(async move {
                let key = format!("A-{i}");
                pf.start(
                    "auftrag-ausfuehrung",
                    vars([("auftragId", key.clone().into())]),
                    None,
                )
                .await
                .unwrap();
                let msg = Publish {
                    name: "AuftragAbgeschlossen".into(),
                    key: key.clone(),
                    message_id: Some(format!("done-{key}")),
                    ..Default::default()
                };
                pf.publish(msg).await.unwrap();
            });
        }
        while set.join_next().await.is_some() {}
        pf.work_until_idle().await.unwrap();
        done += c;
    }
    pf.close();
    let completed = size(&path);
    let blocks = on_disk(&path);
    println!(
        "{n} instances completed in {:.1} s; file {} bytes, {} on disk",
        t.elapsed().as_secs_f64(),
        completed,
        blocks.map_or("unknown".into(), |b| b.to_string())
    );

    clock.advance(Duration::from_secs(32 * 86_400));
    let pf = open();
    let t = Instant::now();
    let (mut i, mut m) = (0, 0);
    loop {
        let (a, b, more) = pf.cleanup(5_000).await.unwrap();
        i += a;
        m += b;
        if !more {
            break;
        }
    }
    pf.close();
    let cleaned = size(&path);
    println!(
        "cleanup removed {i} instances, {m} messages in {:.1} s; file {} bytes",
        t.elapsed().as_secs_f64(),
        cleaned
    );
    let t = Instant::now();
    let (_, compacted) = Postfach::compact(&path).unwrap();
    println!(
        "compact in {:.1} s; file {} bytes",
        t.elapsed().as_secs_f64(),
        compacted
    );
    keep(n, (completed, blocks), cleaned, compacted);
    let per_m = |b: u64| b as f64 * 1_000_000.0 / n as f64 / 1_048_576.0;
    println!(
        "| {n} completed instances | {:.0} MiB per 1M | after cleanup {:.0} MiB per 1M | after compact {:.0} MiB per 1M |",
        per_m(completed),
        per_m(cleaned),
        per_m(compacted)
    );
}

/// Writes `bench-results/retention.json` (when run from the project's
/// directory): the command, the commit, the date, the machine and the sizes.
fn keep(n: u64, (completed, blocks): (u64, Option<u64>), cleaned: u64, compacted: u64) {
    if !std::path::Path::new("bench-results").is_dir() {
        return;
    }
    let run = |cmd: &str, args: &[&str]| {
        std::process::Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".into())
    };
    let cores = std::thread::available_parallelism().map_or(0, |c| c.get());
    // as benches/record.py names the machine
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let model = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_default();
    let gib = read("/proc/meminfo")
        .split_whitespace()
        .nth(1)
        .and_then(|k| k.parse::<u64>().ok())
        .map_or(0, |kb| kb / (1024 * 1024));
    let doc = serde_json::json!({
        "command": format!("cargo run --release --example retention_size -- {n}"),
        "commit": run("git", &["describe", "--always", "--dirty", "--abbrev=7"]),
        "date": run("date", &["-u", "+%Y-%m-%d"]),
        "machine": format!("{cores} cores ({model}), {gib} GiB"),
        "instances": n,
        "bytes_completed": completed,
        "bytes_after_cleanup": cleaned,
        "bytes_after_compact": compacted,
        "bytes_per_instance": completed as f64 / n as f64,
        "disk_bytes_completed": blocks,
        "disk_bytes_per_instance": blocks.map(|b| b as f64 / n as f64),
    });
    std::fs::write(
        "bench-results/retention.json",
        serde_json::to_string_pretty(&doc).unwrap(),
    )
    .unwrap();
}
