//! How fast the statistics of a definition version stay at scale: 100,000
//! instances waiting at the catch event and 1,000,000 buffered completions.
//! `Reader::statistics` (gauges and index heads) is timed against the listing
//! views a console would otherwise have to walk for the same figures
//! (`waiting_at` and the buffered messages), in the same run on the same file;
//! then what each console view asks for (overview, instance list with filters,
//! instance detail, buffered messages), against the 1 s a page may take.
//!
//! `cargo run --release --example statistics_scale -- 100000 1000000`
use postfach::{JobContext, Options, Postfach, Publish, Vars, vars};
use std::time::{Duration, Instant};

const REFERENCE: &str = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");

/// Median of `rounds` calls of `f`.
fn median(rounds: usize, mut f: impl FnMut()) -> Duration {
    let mut t: Vec<Duration> = (0..rounds)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    t[t.len() / 2]
}

#[tokio::main(worker_threads = 2)]
async fn main() {
    let arg = |i: usize, d: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(d)
    };
    let (instances, buffered) = (arg(1, 100_000), arg(2, 1_000_000));
    std::fs::create_dir_all("target/bench-db").unwrap();
    let dir = tempfile::tempdir_in("target/bench-db").unwrap();
    let pf = Postfach::open_with(dir.path().join("stats.redb"), Options::default()).unwrap();
    pf.deploy(
        "a.bpmn",
        REFERENCE,
        [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into(),
    )
    .await
    .unwrap();
    pf.register_handler("auftragUebergeben", |_: JobContext| async {
        Ok(Vars::new())
    });
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for chunk in 0..instances.div_ceil(1000) {
        let pf = pf.clone();
        set.spawn(async move {
            for i in chunk * 1000..((chunk + 1) * 1000).min(instances) {
                pf.start(
                    "auftrag-ausfuehrung",
                    vars([("auftragId", format!("A-{i}").into())]),
                    None,
                )
                .await
                .unwrap();
            }
        });
        if set.len() >= 64 {
            set.join_next().await;
        }
    }
    while set.join_next().await.is_some() {}
    pf.work_until_idle().await.unwrap();
    eprintln!(
        "{instances} instances waiting after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    for chunk in 0..buffered.div_ceil(1000) {
        let pf = pf.clone();
        set.spawn(async move {
            for i in chunk * 1000..((chunk + 1) * 1000).min(buffered) {
                pf.publish(Publish {
                    name: "AuftragAbgeschlossen".into(),
                    key: format!("B-{i}"),
                    message_id: Some(format!("early-{i}")),
                    ..Default::default()
                })
                .await
                .unwrap();
            }
        });
        if set.len() >= 64 {
            set.join_next().await;
        }
    }
    while set.join_next().await.is_some() {}
    eprintln!(
        "{buffered} completions buffered after {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let r = pf.reader().unwrap();
    let st = r.statistics("auftrag-ausfuehrung", None).unwrap().unwrap();
    let wait = st
        .elements
        .iter()
        .find(|e| e.element == "warteAufAbschluss")
        .unwrap();
    assert_eq!(wait.waiting, instances as u64);
    assert_eq!(wait.buffered, buffered as u64);
    let stats = median(21, || {
        std::hint::black_box(r.statistics("auftrag-ausfuehrung", None).unwrap());
    });
    let listing = median(3, || {
        let waiting = r.waiting_at("warteAufAbschluss").unwrap().len();
        let filter = postfach::ops::MessageFilter {
            buffered: true,
            ..Default::default()
        };
        let buffered = r.messages(&filter).unwrap().len();
        std::hint::black_box((waiting, buffered));
    });
    println!(
        "statistics of {} elements over {instances} waiting instances and {buffered} buffered messages: {:.3} ms (median of 21); the listings they summarise: {:.0} ms (median of 3); ratio {:.0}x",
        st.elements.len(),
        stats.as_secs_f64() * 1000.0,
        listing.as_secs_f64() * 1000.0,
        listing.as_secs_f64() / stats.as_secs_f64()
    );

    // what the console's views ask for, each timed as one request would run
    // it (the read and its JSON), against the 1 s a page may take
    let limit = Duration::from_secs(1);
    let page = postfach::ops::InstancePaging::default();
    type View<'a> = (&'static str, Box<dyn Fn() -> usize + 'a>);
    let views: Vec<View> = vec![
        (
            "overview (statistics of the version)",
            Box::new(|| {
                let st = r.statistics("auftrag-ausfuehrung", None).unwrap();
                serde_json::to_vec(&st).unwrap().len()
            }),
        ),
        (
            "instance list, first page of 50, newest first",
            Box::new(|| {
                let p = r.instance_page(&Default::default(), page).unwrap();
                serde_json::to_vec(&p).unwrap().len()
            }),
        ),
        (
            "instance list waiting at warteAufAbschluss",
            Box::new(|| {
                let f = postfach::ops::InstanceFilter {
                    waiting_at: Some("warteAufAbschluss".into()),
                    ..Default::default()
                };
                let p = r.instance_page(&f, page).unwrap();
                serde_json::to_vec(&p).unwrap().len()
            }),
        ),
        (
            "instance list by correlation key",
            Box::new(|| {
                let f = postfach::ops::InstanceFilter {
                    key: Some(format!("A-{}", instances / 2)),
                    ..Default::default()
                };
                let p = r.instance_page(&f, page).unwrap();
                assert_eq!(p.instances.len(), 1);
                serde_json::to_vec(&p).unwrap().len()
            }),
        ),
        (
            "instance list by a variable value nobody has (one budget of reads)",
            Box::new(|| {
                let f = postfach::ops::InstanceFilter {
                    variable: Some(("auftragId".into(), "nobody".into())),
                    ..Default::default()
                };
                let p = r.instance_page(&f, page).unwrap();
                serde_json::to_vec(&p).unwrap().len()
            }),
        ),
        (
            "instance detail",
            Box::new(|| {
                let d = r.instance_detail(instances as u64 / 2).unwrap().unwrap();
                serde_json::to_vec(&d).unwrap().len()
            }),
        ),
        (
            "buffered messages, first page of 100",
            Box::new(|| {
                let f = postfach::ops::MessageFilter {
                    buffered: true,
                    ..Default::default()
                };
                let p = r.message_page(&f, None, 100).unwrap();
                serde_json::to_vec(&p).unwrap().len()
            }),
        ),
    ];
    for (name, view) in &views {
        let t = median(11, || {
            std::hint::black_box(view());
        });
        println!(
            "{name}: {:.2} ms (median of 11), {:.4} of the 1 s limit{}",
            t.as_secs_f64() * 1000.0,
            t.as_secs_f64() / limit.as_secs_f64(),
            if t > limit { " — OVER THE LIMIT" } else { "" }
        );
    }
    drop(views);
    drop(r);
    pf.close();
}
