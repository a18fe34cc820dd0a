//! Embedding postfach into a host process: the engine only, no server, no
//! command line (`postfach = { version = "…", default-features = false }`).
//!
//! Run: `cargo run --example embedded --no-default-features`
//!
//! The host deploys the reference model, registers its invoice handler, starts an
//! order, and the provider's completion arrives before the order waits for it: it
//! is buffered, then correlated when the hand-over ran. The handler is called once,
//! with an idempotency key that stays the same across retries and restarts.

use postfach::{JobContext, Postfach, Publish, Vars, vars};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), postfach::Error> {
    let dir = std::env::temp_dir().join(format!("postfach-embedded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(postfach::StoreError::Io)?;
    let pf = Postfach::open(dir.join("orders.redb"))?;

    let xml = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");
    let keys = [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into();
    for d in pf.deploy("auftrag-ausfuehrung.bpmn", xml, keys).await? {
        println!("deployed {} version {}", d.process, d.version);
    }

    let invoices = Arc::new(AtomicUsize::new(0));
    let issued = invoices.clone();
    // the hand-over: a real host sends the order to the provider here
    pf.register_handler("auftragUebergeben", |_job: JobContext| async move {
        Ok(Vars::new())
    });
    pf.register_handler("rechnungStellen", move |job: JobContext| {
        let issued = issued.clone();
        async move {
            // a real host writes the invoice keyed by job.idempotency_key
            println!(
                "invoice for {} (key {})",
                job.variables["auftragId"], job.idempotency_key
            );
            issued.fetch_add(1, Ordering::SeqCst);
            Ok(Vars::new())
        }
    });

    let order = pf
        .start(
            "auftrag-ausfuehrung",
            vars([("auftragId", "4711".into())]),
            None,
        )
        .await?;
    // the completion overtakes the hand-over: it waits in the buffer
    let early = pf
        .publish(Publish {
            name: "AuftragAbgeschlossen".into(),
            key: "4711".into(),
            message_id: Some("evt-1".into()),
            variables: vars([("erledigtePositionen", 1200.into())]),
            ..Default::default()
        })
        .await?;
    println!("completion: {}", early.outcome.as_str());

    pf.work_until_idle().await?;
    let state = pf.reader()?.instance(order)?.map(|v| v.state.to_string());
    println!(
        "order {order}: {}, {} invoice(s)",
        state.unwrap_or_default(),
        invoices.load(Ordering::SeqCst)
    );
    pf.close();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
