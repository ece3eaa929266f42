//! POSTing one JSON-RPC body to a node: keep-alive pools, a time-out per attempt, a size bound.
//!
//! Every way a node can fail maps to one of the pipeline's failure kinds
//! (`chainrouter.router.upstream.FailureKind`); the pipeline decides what each one means.

use std::fs::File;
use std::io::BufReader;
use std::time::Duration;

use hyper::body::{Bytes, HttpBody};
use hyper::client::HttpConnector;
use hyper::header::{HeaderValue, CONTENT_TYPE, USER_AGENT};
use hyper::{Body, Client, Method, Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;

/// Why a node gave no usable answer; the names are `FailureKind` values.
#[derive(Debug)]
pub struct Failure {
    pub kind: &'static str,
    pub detail: String,
    pub status: Option<u16>,
}

impl Failure {
    fn new(kind: &'static str, detail: impl Into<String>) -> Self {
        Failure { kind, detail: detail.into(), status: None }
    }
}

pub struct UpstreamSettings {
    pub max_response_bytes: usize,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub ca_file: Option<String>,
    pub user_agent: String,
}

pub struct Upstream {
    client: Client<HttpsConnector<HttpConnector>, Body>,
    max_response_bytes: usize,
    user_agent: HeaderValue,
}

fn tls_config(ca_file: Option<&str>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    // A system store with a few unreadable certificates is still usable; an empty one is not.
    for cert in rustls_native_certs::load_native_certs().unwrap_or_default() {
        let _ = roots.add(&rustls::Certificate(cert.0));
    }
    if let Some(path) = ca_file {
        let file = File::open(path).map_err(|e| format!("CA file {path}: {e}"))?;
        let certs = rustls_pemfile::certs(&mut BufReader::new(file))
            .map_err(|e| format!("CA file {path}: {e}"))?;
        if certs.is_empty() {
            return Err(format!("CA file {path}: no PEM certificate in it"));
        }
        for cert in certs {
            roots.add(&rustls::Certificate(cert)).map_err(|e| format!("CA file {path}: {e}"))?;
        }
    }
    Ok(rustls::ClientConfig::builder()
        .with_safe_defaults()
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl Upstream {
    pub fn new(settings: &UpstreamSettings) -> Result<Self, String> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(settings.connect_timeout));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(settings.ca_file.as_deref())?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder()
            .pool_idle_timeout(settings.idle_timeout)
            // A kept connection the node closed before the request went out is retried on a
            // fresh one: nothing was sent, so nothing is processed twice.
            .retry_canceled_requests(true)
            .build(connector);
        let user_agent = HeaderValue::from_str(&settings.user_agent)
            .map_err(|_| "the user agent is not a valid header value".to_string())?;
        Ok(Upstream { client, max_response_bytes: settings.max_response_bytes, user_agent })
    }

    fn request(&self, uri: Uri, body: Bytes) -> Request<Body> {
        let mut request = Request::new(Body::from(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(USER_AGENT, self.user_agent.clone());
        request
    }

    /// POST `body` to `url`; a 2xx answer's body, or why there is none, within `timeout`.
    pub async fn post(&self, url: &str, body: Bytes, timeout: Duration) -> Result<Bytes, Failure> {
        match tokio::time::timeout(timeout, self.exchange(url, body)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Failure::new(
                "timeout",
                format!("no complete answer within {:.3} s", timeout.as_secs_f64()),
            )),
        }
    }

    async fn exchange(&self, url: &str, body: Bytes) -> Result<Bytes, Failure> {
        let uri: Uri = url
            .parse()
            .map_err(|_| Failure::new("transport", "the node URL is not a valid URI"))?;
        let mut retried = false;
        let response = loop {
            match self.client.request(self.request(uri.clone(), body.clone())).await {
                Ok(response) => break response,
                // A kept connection the node closed as the call went out (its idle time-out,
                // say): no answer began, so the call goes once more, on a fresh connection.
                Err(e) if e.is_incomplete_message() && !retried => retried = true,
                Err(e) => return Err(Failure::new("transport", transport_detail(&e))),
            }
        };
        let status = response.status();
        if status == StatusCode::TOO_MANY_REQUESTS {
            return Err(Failure {
                kind: "rate_limited",
                detail: "HTTP 429".to_string(),
                status: Some(429),
            });
        }
        if !status.is_success() {
            return Err(Failure {
                kind: "http_status",
                detail: format!("HTTP {}", status.as_u16()),
                status: Some(status.as_u16()),
            });
        }
        self.read_bounded(response.into_body()).await
    }

    async fn read_bounded(&self, mut body: Body) -> Result<Bytes, Failure> {
        let max = self.max_response_bytes;
        if body.size_hint().lower() as usize > max {
            return Err(too_large(max));
        }
        let first = match body.data().await {
            None => return Ok(Bytes::new()),
            Some(chunk) => chunk.map_err(|e| Failure::new("transport", transport_detail(&e)))?,
        };
        if first.len() > max {
            return Err(too_large(max));
        }
        // Most answers arrive in one chunk: hand that one on without copying.
        let second = match body.data().await {
            None => return Ok(first),
            Some(chunk) => chunk.map_err(|e| Failure::new("transport", transport_detail(&e)))?,
        };
        let mut whole = Vec::with_capacity(first.len() + second.len());
        whole.extend_from_slice(&first);
        whole.extend_from_slice(&second);
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| Failure::new("transport", transport_detail(&e)))?;
            if whole.len() + chunk.len() > max {
                return Err(too_large(max));
            }
            whole.extend_from_slice(&chunk);
        }
        if whole.len() > max {
            return Err(too_large(max));
        }
        Ok(Bytes::from(whole))
    }
}

fn too_large(max: usize) -> Failure {
    Failure::new("too_large", format!("answer larger than {max} bytes"))
}

/// hyper's error with its causes: "connection error: Connection reset by peer", say.
fn transport_detail(error: &hyper::Error) -> String {
    let mut detail = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        detail.push_str(": ");
        detail.push_str(&cause.to_string());
        source = cause.source();
    }
    detail
}
