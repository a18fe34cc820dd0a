//! pyzeebe 4.7.0 (PyPI), the Python client a Camunda 8 team writes workers
//! with, against `postfach run`'s Zeebe gateway protocol: it asks the gRPC
//! health service and the topology, deploys the Zeebe-flavoured order
//! model, creates 100 orders, and its worker hands each order over —
//! publishing the provider's completion before the order waits for it
//! (postfach buffers it, then correlates it), once twice (refused), once for
//! an order nobody placed (kept) — and invoices it. A credit check started
//! with its result ends at its error boundary: the worker raised a
//! BusinessError. Every order is invoiced once and ends.
#![cfg(feature = "zeebe")]
use crate::common;
use common::server::Server;

const ORDERS: usize = 100;

#[test]
fn pyzeebe_workers_invoice_orders_through_the_zeebe_gateway_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let zeebe = format!("127.0.0.1:{}", common::server::free_ports(1));
    let srv = Server::launch(dir.path(), &["--zeebe-listen".into(), zeebe.clone()], &[]);
    let out = common::zeebe::pyzeebe_orders(&zeebe, ORDERS, 1);

    let url = format!("http://{}", srv.addr);
    assert_eq!(
        common::server::completed(&url, None, "auftrag-zeebe", ORDERS),
        ORDERS,
        "every order ends"
    );
    let key: i64 = out["rejected"].as_str().unwrap().parse().unwrap();
    let view = common::server::cli_ok(&url, None, &["instance", &(key - (1i64 << 51)).to_string()]);
    assert!(view.to_string().contains("abgelehnt"), "{view}");
    let kept = common::server::cli_ok(&url, None, &["messages", "--buffered"]).to_string();
    assert!(
        kept.contains("done-niemand"),
        "a completion for nobody is kept: {kept}"
    );
    srv.stop();
}
