//! Compiles Zeebe's gateway protocol (proto/zeebe/gateway.proto, vendored
//! unchanged) into the gRPC service and messages of `server::zeebe` when the
//! `zeebe` feature is on — with protox, so no `protoc` is needed.

fn main() {
    println!("cargo:rerun-if-changed=proto/zeebe/gateway.proto");
    #[cfg(feature = "zeebe")]
    {
        let files = protox::compile(["gateway.proto"], ["proto/zeebe"])
            .unwrap_or_else(|e| panic!("proto/zeebe/gateway.proto: {e}"));
        tonic_prost_build::configure()
            .build_client(true)
            .build_server(true)
            .compile_fds(files)
            .unwrap_or_else(|e| panic!("generating the Zeebe gateway service: {e}"));
    }
}
