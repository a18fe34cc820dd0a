//! A recording HTTP proxy: what a client really sent, request by request.
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// The method and target (path and query) of each request a proxy passed on.
pub type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A proxy in front of `upstream` that records the method and target of every
/// request it passes on (one request per connection: it closes each).
pub fn recorder(upstream: String) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().map_while(Result::ok) {
            let (upstream, record) = (upstream.clone(), record.clone());
            std::thread::spawn(move || pass_on(client, &upstream, &record));
        }
    });
    (addr, seen)
}

fn pass_on(mut client: TcpStream, upstream: &str, seen: &Mutex<Vec<(String, String)>>) {
    let mut request = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match client.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&request[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while request.len() < head_end + length {
        match client.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let mut line = head.lines().next().unwrap_or_default().split(' ');
    let (method, target) = (
        line.next().unwrap_or_default(),
        line.next().unwrap_or_default(),
    );
    seen.lock()
        .unwrap()
        .push((method.to_string(), target.to_string()));
    // the same request, closed after its answer
    let mut head: Vec<&str> = head
        .trim_end()
        .lines()
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .collect();
    head.push("connection: close");
    let mut up = TcpStream::connect(upstream).unwrap();
    up.write_all(format!("{}\r\n\r\n", head.join("\r\n")).as_bytes())
        .unwrap();
    up.write_all(&request[head_end..head_end + length]).unwrap();
    let mut answer = Vec::new();
    let _ = up.read_to_end(&mut answer);
    let _ = client.write_all(&answer);
}
