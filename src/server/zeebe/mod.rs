//! Zeebe's gateway protocol: the gRPC face Camunda 8's clients and job
//! workers speak (`proto/zeebe/gateway.proto`, vendored unchanged), served
//! by `postfach run` on `--zeebe-listen` beside the HTTP API. Each call is a
//! face of an operation of the catalogue: it needs that operation's
//! permission, under the same tokens as the HTTP API (the `authorization`
//! metadata), and calls the same library function.
//!
//! Invariant: no call changes anything its caller's roles do not grant;
//! every key handed out names its partition and id ([`keys`]); postfach's
//! contract holds where Zeebe's differs (a message without a subscription is
//! buffered or parked, never dropped; a duplicate message id is
//! `ALREADY_EXISTS`); a call postfach does not serve answers `UNIMPLEMENTED`
//! naming it.

mod calls;
pub mod forward;
mod incidents;
pub mod keys;
pub mod rest;
mod service;
mod wire;

/// The messages and the service generated from `gateway.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("gateway_protocol");
}

pub use forward::Forward;
pub use service::{Face, OWNER};

/// Largest message a client may send (a deployment of several models).
pub const MAX_MESSAGE: usize = 8 * 1024 * 1024;

/// How long a client may take for its TLS handshake.
const HANDSHAKE: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves the gateway protocol of `face` on `listener` until `stop`
/// resolves — over TLS when `tls` is given (each handshake in its own task,
/// bounded in time) —, with the standard gRPC health service saying it
/// serves `gateway_protocol.Gateway` (clients such as pyzeebe ask it).
pub async fn serve<G: proto::gateway_server::Gateway>(
    listener: tokio::net::TcpListener,
    face: G,
    tls: Option<tokio_rustls::TlsAcceptor>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    // Camunda's Node client compresses what it sends with gzip
    let service = proto::gateway_server::GatewayServer::new(face)
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<proto::gateway_server::GatewayServer<G>>()
        .await;
    let router = tonic::transport::Server::builder()
        .add_service(health)
        .add_service(service);
    let Some(tls) = tls else {
        // small answers go out at once (Nagle's algorithm held each
        // call's trailers back for the client's delayed ACK)
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        return router.serve_with_incoming_shutdown(incoming, stop).await;
    };
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let accepting = tokio::spawn(async move {
        while let Ok((tcp, peer)) = listener.accept().await {
            let (tls, tx) = (tls.clone(), tx.clone());
            let _ = tcp.set_nodelay(true);
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE, tls.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        let _ = tx.send(Ok::<_, std::io::Error>(stream)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    let incoming = tonic::codegen::tokio_stream::wrappers::ReceiverStream::new(rx);
    let served = router.serve_with_incoming_shutdown(incoming, stop).await;
    accepting.abort();
    served
}
