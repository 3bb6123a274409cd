//! `Browser`: headless Chromium driven over WebDriver, for the dashboard's tests. It starts chromedriver on a
//! loopback port in its own process group, opens a session with a fresh profile directory, and offers the few
//! commands the tests need; waits poll with a deadline, never a fixed sleep. Dropping it (a panic included) ends the
//! session and kills chromedriver's whole group, so no browser outlives its test.
//!
//! Written over `reqwest`, which the tests already use: WebDriver is a handful of JSON calls.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::harness::poll;

/// How long a wait for the page may take before the test fails: generous, since it is no measure of speed.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The key under which WebDriver returns an element's reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// The size of the browser's viewport.
#[derive(Debug, Clone, Copy)]
pub enum Viewport {
    /// A laptop screen.
    Desktop,
    /// A phone held upright (390 by 844 CSS pixels, as an iPhone 12 to 14), emulated with touch.
    Phone,
}

/// A headless Chromium under WebDriver.
pub struct Browser {
    driver: Child,
    port: u16,
    session: Option<String>,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

/// An error answer from chromedriver.
#[derive(Debug)]
pub struct DriverError {
    /// WebDriver's error code, such as `no such element`.
    pub error: String,
    /// What chromedriver said.
    pub message: String,
}

impl Browser {
    /// Starts chromedriver and a browser session. Fails the test, saying how to install them, when chromedriver is
    /// missing.
    pub async fn start(viewport: Viewport) -> Browser {
        let chromedriver = find_chromedriver();
        let profile = tempfile::tempdir().expect("a temp dir for the browser profile");
        // A port chosen by the kernel can be taken by someone else before chromedriver binds it: try a few.
        for _ in 0..5 {
            let port = free_port();
            let mut driver = Command::new(&chromedriver)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("starting {}: {e}", chromedriver.display()));
            let http = crate::harness::http();
            if wait_until_ready(&http, port, &mut driver).await {
                let mut browser = Browser {
                    driver,
                    port,
                    session: None,
                    http,
                    _profile: profile,
                };
                browser.open_session(viewport).await;
                return browser;
            }
            kill_group(&mut driver);
        }
        panic!("chromedriver did not start on a loopback port after 5 tries");
    }

    async fn open_session(&mut self, viewport: Viewport) {
        let mut args = vec![
            "--headless=new".to_owned(),
            // CI runs as root, where Chromium's sandbox cannot start.
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-extensions".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--lang=en-US".to_owned(),
            "--hide-scrollbars".to_owned(),
            format!("--user-data-dir={}", self._profile.path().display()),
        ];
        let mut options = json!({});
        match viewport {
            Viewport::Desktop => args.push("--window-size=1280,900".to_owned()),
            Viewport::Phone => {
                options["mobileEmulation"] = json!({
                    "deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 2.0, "touch": true}
                });
            }
        }
        options["args"] = json!(args);
        if Path::new("/usr/bin/chromium").exists() {
            options["binary"] = json!("/usr/bin/chromium");
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": options,
        }}});
        let value = self
            .command(reqwest::Method::POST, "/session", Some(capabilities))
            .await
            .unwrap_or_else(|e| panic!("chromedriver could not start Chromium: {e:?}"));
        let id = value["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {value}"));
        self.session = Some(id.to_owned());
    }

    /// One WebDriver command; the `value` of its answer.
    async fn command(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, DriverError> {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        let mut request = self.http.request(method, url);
        if let Some(body) = body {
            request = request
                .header("Content-Type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.expect("chromedriver answers");
        let ok = response.status().is_success();
        let bytes = response.bytes().await.expect("chromedriver's answer");
        let answer: Value = serde_json::from_slice(&bytes).expect("chromedriver answers JSON");
        let value = answer["value"].clone();
        if ok {
            Ok(value)
        } else {
            Err(DriverError {
                error: value["error"].as_str().unwrap_or("unknown").to_owned(),
                message: value["message"].as_str().unwrap_or_default().to_owned(),
            })
        }
    }

    /// A command on the session; a WebDriver error fails the test.
    async fn session_command(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let session = self.session.as_deref().expect("an open session");
        self.command(method, &format!("/session/{session}{path}"), body)
            .await
            .unwrap_or_else(|e| panic!("WebDriver {path}: {e:?}"))
    }

    /// Loads `url` (a change of the `#` part alone does not reload the page).
    pub async fn goto(&self, url: &str) {
        self.session_command(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    /// Runs `script` (a function body, with `arguments`) in the page and returns what it returns.
    pub async fn execute(&self, script: &str, args: Value) -> Value {
        self.session_command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
        .await
    }

    /// Runs `script` in every page this session loads from now on, before the page's own scripts (Chromium's
    /// `Page.addScriptToEvaluateOnNewDocument`, through chromedriver): to watch what the page does from its start.
    pub async fn before_each_page(&self, script: &str) {
        self.session_command(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            Some(json!({
                "cmd": "Page.addScriptToEvaluateOnNewDocument",
                "params": { "source": script },
            })),
        )
        .await;
    }

    /// Polls `script` until it returns something truthy, and returns that; fails the test after [`DEADLINE`],
    /// showing what the page said.
    pub async fn wait_for(&self, what: &str, script: &str) -> Value {
        self.wait_for_within(DEADLINE, what, script).await
    }

    /// As [`Browser::wait_for`], failing after `limit` instead: for what takes long by design (a backoff, a bulk
    /// action over thousands of jobs on a busy machine).
    pub async fn wait_for_within(&self, limit: Duration, what: &str, script: &str) -> Value {
        let found = poll(limit, || async move {
            let value = self.execute(script, json!([])).await;
            let truthy = !matches!(&value, Value::Null | Value::Bool(false))
                && value != json!(0)
                && value != json!("");
            truthy.then_some(value)
        })
        .await;
        if let Some((value, _)) = found {
            return value;
        }
        let text = self
            .execute("return document.body.innerText.slice(0, 2000)", json!([]))
            .await;
        panic!(
            "timed out after {limit:?} waiting for: {what}\npage errors: {:?}\npage text:\n{}",
            self.errors().await,
            text.as_str().unwrap_or_default()
        );
    }

    /// Clicks the element that `css` selects, retrying while it is missing or being replaced (the page redraws
    /// what changed on each poll).
    pub async fn click(&self, css: &str) {
        let last_error = &std::sync::Mutex::new(None);
        let clicked = poll(DEADLINE, || async move {
            let clicked = match self.find(css).await {
                Ok(element) => {
                    let session = self.session.as_deref().expect("an open session");
                    self.command(
                        reqwest::Method::POST,
                        &format!("/session/{session}/element/{element}/click"),
                        Some(json!({})),
                    )
                    .await
                }
                Err(e) => Err(e),
            };
            match clicked {
                Ok(_) => Some(()),
                Err(e) => {
                    *last_error.lock().unwrap() = Some(e);
                    None
                }
            }
        })
        .await;
        if clicked.is_none() {
            let e = last_error.lock().unwrap().take();
            panic!(
                "clicking {css}: {:?}",
                e.expect("a failed click left its error")
            );
        }
    }

    /// Replaces the text of the input that `css` selects with `text`, as typed keys.
    pub async fn type_into(&self, css: &str, text: &str) {
        let element = self
            .find(css)
            .await
            .unwrap_or_else(|e| panic!("finding {css}: {e:?}"));
        let path = format!("/element/{element}");
        self.session_command(
            reqwest::Method::POST,
            &format!("{path}/clear"),
            Some(json!({})),
        )
        .await;
        self.session_command(
            reqwest::Method::POST,
            &format!("{path}/value"),
            Some(json!({ "text": text })),
        )
        .await;
    }

    async fn find(&self, css: &str) -> Result<String, DriverError> {
        let session = self.session.as_deref().expect("an open session");
        let value = self
            .command(
                reqwest::Method::POST,
                &format!("/session/{session}/element"),
                Some(json!({"using": "css selector", "value": css})),
            )
            .await?;
        Ok(value[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("an element reference, got {value}"))
            .to_owned())
    }

    /// The errors the page collected (`window.cairnErrors`: uncaught errors, unhandled rejections,
    /// `console.error`, failed loads, policy violations).
    pub async fn errors(&self) -> Vec<String> {
        let value = self
            .execute(
                "return window.cairnErrors || ['window.cairnErrors is missing']",
                json!([]),
            )
            .await;
        serde_json::from_value(value).expect("a list of strings")
    }

    /// Saves a screenshot of the viewport as `NAME.png` in the screenshots directory; returns its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let value = self
            .session_command(reqwest::Method::GET, "/screenshot", None)
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(value.as_str().expect("base64 text"))
            .expect("valid base64");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("creating the screenshots directory");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("writing a screenshot");
        path
    }

    /// Ends the session (Chromium quits) and stops chromedriver.
    pub async fn close(mut self) {
        if let Some(session) = self.session.take() {
            let _ = self
                .command(
                    reqwest::Method::DELETE,
                    &format!("/session/{session}"),
                    None,
                )
                .await;
        }
        // Drop kills chromedriver.
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // After a panic there is no runtime to await on: end the session with a blocking request of our own, so that
        // Chromium quits cleanly, then kill the group in case it did not.
        if let Some(session) = self.session.take() {
            delete_session_blocking(self.port, &session);
        }
        kill_group(&mut self.driver);
    }
}

/// The directory screenshots go to: `target/dashboard-screenshots` of the build that made this test binary.
pub fn screenshot_dir() -> PathBuf {
    // Cargo gives integration tests `<target>/tmp`, wherever the target directory is and whoever made it.
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory holds tmp")
        .join("dashboard-screenshots")
}

/// chromedriver from `$CHROMEDRIVER`, the `PATH`, or where Debian's chromium-driver puts it.
fn find_chromedriver() -> PathBuf {
    let from_env = std::env::var_os("CHROMEDRIVER").map(PathBuf::from);
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("chromedriver"))
            .find(|p| p.is_file())
    });
    from_env
        .or(on_path)
        .or_else(|| Some(PathBuf::from("/usr/bin/chromedriver")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "chromedriver not found ($CHROMEDRIVER, PATH, /usr/bin/chromedriver): the dashboard's browser tests \
                 need Debian's chromium and chromium-driver packages. Run scripts/test, which installs them \
                 (scripts/install-chromium), or: apt-get install chromium chromium-driver"
            )
        })
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    listener.local_addr().expect("its address").port()
}

/// Polls chromedriver's `/status` until it is ready; false if it exited (its port was taken) or never got ready.
async fn wait_until_ready(http: &reqwest::Client, port: u16, driver: &mut Child) -> bool {
    let ready = poll(Duration::from_secs(20), || {
        let exited = driver.try_wait().expect("polling chromedriver").is_some();
        async move {
            if exited {
                return Some(false);
            }
            let status = http
                .get(format!("http://127.0.0.1:{port}/status"))
                .send()
                .await;
            if let Ok(response) = status
                && let Ok(bytes) = response.bytes().await
                && let Ok(body) = serde_json::from_slice::<Value>(&bytes)
                && body["value"]["ready"] == json!(true)
            {
                return Some(true);
            }
            None
        }
    })
    .await;
    ready.is_some_and(|(ready, _)| ready)
}

/// `DELETE /session/ID` over a plain socket, waiting at most a few seconds.
fn delete_session_blocking(port: u16, session: &str) {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!(
        "DELETE /session/{session} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_ok() {
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
    }
}

/// Kills chromedriver and everything in its process group (the browser it started), and reaps it.
fn kill_group(driver: &mut Child) {
    if let Ok(pid) = i32::try_from(driver.id()) {
        // SAFETY: kill only sends a signal; a negative pid names the process group chromedriver leads.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = driver.wait();
}
