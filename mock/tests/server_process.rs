//! The `mock-model-server` binary as the Lua tests and bench/bench.py use it: it prints its
//! base URL, answers with `--default-text`, and exits when its stdin closes. (Being an
//! integration test also makes `cargo test --workspace` build the binary into target/<profile>/,
//! where the host crate's tests and the benchmarks look for it.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn prints_its_url_answers_and_exits_when_stdin_closes() {
    let mut server = Command::new(env!("CARGO_BIN_EXE_mock-model-server"))
        .args(["--default-text", "hello from the mock"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut url).unwrap();
    let address = url.trim().strip_prefix("http://").and_then(|u| u.strip_suffix("/v1")).expect(&url);

    let body = r#"{"model":"mock-model","stream":false,"messages":[{"role":"user","content":"hi"}]}"#;
    let mut socket = TcpStream::connect(address).unwrap();
    write!(
        socket,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    socket.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("hello from the mock"), "{response}");

    drop(server.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the server outlived its stdin");
        std::thread::sleep(Duration::from_millis(20));
    }
}
