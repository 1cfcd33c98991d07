#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The lab's front door (the global name) keeps serving after its process ran out of file
//! descriptors: a lab started with a small descriptor limit is flooded with held connections
//! until it has none left and its listen backlog is full, the flood ends, and a new client is
//! answered. A front door that gave up after one accept error (EMFILE) fails this every time.
//! A front door whose two-way copy waited for both ends fails it when the flood's timing left
//! every descriptor on legs that no Region had accepted (seen, not every run: it depends on
//! which connections the Regions accepted before the limit).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Far fewer descriptors than the flood needs: each held connection costs the lab at least
/// one (the accepted socket) and usually three (its leg to a Region, and that Region's end).
const DESCRIPTOR_LIMIT: u32 = 256;
const FLOOD: usize = 2_000;

struct Lab(Child);

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `wsdr lab` under `ulimit -n`, and its front door's address once it prints it.
fn start_lab() -> (Lab, SocketAddr) {
    let script = format!(
        "ulimit -n {DESCRIPTOR_LIMIT} && exec \"$0\" lab --time-scale 60 --listen 127.0.0.1:0"
    );
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_wsdr"))
        .env_remove("WSDR_LAB_CONTROL_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start wsdr lab");
    let stdout = child.stdout.take().expect("the lab's stdout");
    let lab = Lab(child);
    let mut lines = BufReader::new(stdout).lines();
    for line in lines.by_ref().take(200) {
        let line = line.expect("read the lab's stdout");
        if let Some(rest) = line.split("global name (front door): ws://").nth(1) {
            let addr = rest
                .trim_end_matches('/')
                .split('/')
                .next()
                .unwrap_or_default();
            // Keep reading what the lab prints: a closed pipe would fail its next write to
            // stdout and end it, which is not what this test is about.
            std::thread::spawn(move || lines.for_each(drop));
            return (lab, addr.parse().expect("the front door's address"));
        }
    }
    panic!("the lab never printed its front door");
}

/// Whether an HTTP request through the front door gets any HTTP answer within `within`
/// (a Region refuses a token-less upgrade: that refusal is an answer).
fn answered(front_door: SocketAddr, within: Duration) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&front_door, within) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(within));
    let request = "GET / HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.")
}

/// How many descriptors process `pid` has open (Linux: its `/proc/<pid>/fd` entries).
fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

#[test]
fn the_front_door_keeps_accepting_after_running_out_of_descriptors() {
    let (lab, front_door) = start_lab();
    assert!(
        answered(front_door, Duration::from_secs(10)),
        "the front door answers before the flood"
    );

    // Hold connections until the lab has no descriptor left; each is also written to, so
    // the ones the lab did accept open their leg to a Region. A connect that times out (the
    // listen backlog full while the lab catches up) is tried again, within bounds.
    let pid = lab.0.id();
    let mut held = Vec::with_capacity(FLOOD);
    let started = Instant::now();
    while held.len() < FLOOD && started.elapsed() < Duration::from_secs(60) {
        if open_descriptors(pid) + 2 >= DESCRIPTOR_LIMIT as usize {
            break;
        }
        match TcpStream::connect_timeout(&front_door, Duration::from_secs(1)) {
            Ok(mut stream) => {
                let _ = stream.write_all(b"GET / HTTP/1.1\r\nHost: lab\r\n");
                held.push(stream);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    // Then fill the listen backlog behind it: connections the kernel holds for a front door
    // that cannot accept them now, and Regions that cannot accept the legs it opens.
    let mut refused_in_a_row = 0;
    while refused_in_a_row < 10 && held.len() < FLOOD {
        match TcpStream::connect_timeout(&front_door, Duration::from_millis(250)) {
            Ok(mut stream) => {
                let _ = stream.write_all(b"GET / HTTP/1.1\r\nHost: lab\r\n");
                held.push(stream);
                refused_in_a_row = 0;
            }
            Err(_) => refused_in_a_row += 1,
        }
    }
    assert!(
        open_descriptors(pid) + 2 >= DESCRIPTOR_LIMIT as usize,
        "the flood used up the lab's descriptors ({} open, {} connections held)",
        open_descriptors(pid),
        held.len()
    );
    drop(held);

    // The descriptors come back as the lab closes the dropped connections; a front door that
    // kept accepting serves the next client once they have.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if answered(front_door, Duration::from_secs(3)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the front door stopped accepting after the flood"
        );
    }
}
