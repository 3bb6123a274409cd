//! A TCP proxy on loopback that can black-hole the links through it: bytes stop both ways and nothing closes, as
//! when a switch dies or a VM pauses between a node and its database. Threads, not tasks: it must go on working
//! while the test's runtime is busy, and it carries only a few sessions.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};

/// The proxy: connections to [`Proxy::addr`] are carried to the target.
pub struct Proxy {
    pub addr: SocketAddr,
    holed: Arc<(Mutex<bool>, Condvar)>,
}

impl Proxy {
    /// Starts a proxy to `target` on a free loopback port.
    pub fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the proxy");
        let addr = listener.local_addr().unwrap();
        let holed = Arc::new((Mutex::new(false), Condvar::new()));
        let accepting = holed.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let holed = accepting.clone();
                // Connecting to the target waits out a black hole too, as the packets of a handshake would be lost.
                std::thread::spawn(move || {
                    wait_open(&holed);
                    let Ok(server) = TcpStream::connect(target) else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    carry(&client, &server, &holed);
                    carry(&server, &client, &holed);
                });
            }
        });
        Proxy { addr, holed }
    }

    /// Stops every byte, both ways, on every link through the proxy, and every new link; closes nothing.
    pub fn black_hole(&self) {
        *self.holed.0.lock().unwrap() = true;
    }

    /// Lets bytes through again, those held back first.
    pub fn heal(&self) {
        *self.holed.0.lock().unwrap() = false;
        self.holed.1.notify_all();
    }
}

/// Waits while the links are black-holed.
fn wait_open(holed: &(Mutex<bool>, Condvar)) {
    let mut closed = holed.0.lock().unwrap();
    while *closed {
        closed = holed.1.wait(closed).unwrap();
    }
}

/// Copies from `from` to `to` on a thread of its own, holding bytes back while the links are black-holed; passes
/// an end of stream on.
fn carry(from: &TcpStream, to: &TcpStream, holed: &Arc<(Mutex<bool>, Condvar)>) {
    let (mut from, mut to, holed) = (
        from.try_clone().unwrap(),
        to.try_clone().unwrap(),
        holed.clone(),
    );
    std::thread::spawn(move || {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            wait_open(&holed);
            let read = match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            wait_open(&holed);
            if to.write_all(&buffer[..read]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
