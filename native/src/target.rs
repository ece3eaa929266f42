//! A node URL parsed once: where to connect, and the request head up to its length.
//!
//! `http` or `https`, a host, an optional port; the path and query as given (`/` when empty), the fragment
//! dropped; credentials (`https://user:pass@host/`) sent as Basic authorisation and never in
//! `Host`. Only visible ASCII is accepted anywhere in the URL, so no URL can end a header line
//! and add one of its own.

/// Where a request goes: the key of the pool of kept connections.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Origin {
    /// Lower case, without the brackets of an IPv6 address: what is dialled and named in TLS.
    pub host: String,
    pub port: u16,
    pub tls: bool,
}

pub struct Target {
    pub origin: Origin,
    /// The request line and headers, ending in `Content-Length: `; the length, a blank line and
    /// the body follow per call.
    pub head: Vec<u8>,
}

impl Target {
    /// The whole request for `body`, ready to be written at once.
    pub fn request(&self, body: &[u8]) -> Vec<u8> {
        let length = body.len().to_string();
        let mut request = Vec::with_capacity(self.head.len() + length.len() + 4 + body.len());
        request.extend_from_slice(&self.head);
        request.extend_from_slice(length.as_bytes());
        request.extend_from_slice(b"\r\n\r\n");
        request.extend_from_slice(body);
        request
    }
}

const INVALID: &str = "invalid node URL";

pub fn parse(url: &str, user_agent: &str) -> Result<Target, &'static str> {
    if url.is_empty() || !url.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(INVALID);
    }
    let (tls, rest) = if let Some(rest) = strip_prefix_ignore_case(url, "https://") {
        (true, rest)
    } else if let Some(rest) = strip_prefix_ignore_case(url, "http://") {
        (false, rest)
    } else {
        return Err(INVALID);
    };
    let rest = rest.split('#').next().unwrap_or_default();
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((userinfo, host_port)) => (Some(userinfo), host_port),
        None => (None, authority),
    };
    let (host, port) = split_host_port(host_port)?;
    let port = port.unwrap_or(if tls { 443 } else { 80 });
    let path = match path {
        "" => "/".to_string(),
        query if query.starts_with('?') => format!("/{query}"),
        path => path.to_string(),
    };
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host_port}\r\nUser-Agent: {user_agent}\r\n\
         Content-Type: application/json\r\n"
    );
    if let Some(userinfo) = userinfo {
        let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        let mut pair = percent_decoded(user);
        pair.push(b':');
        pair.extend(percent_decoded(password));
        head.push_str(&format!("Authorization: Basic {}\r\n", base64::encode(pair)));
    }
    head.push_str("Content-Length: ");
    Ok(Target { origin: Origin { host: host.to_ascii_lowercase(), port, tls }, head: head.into() })
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; an empty port means the scheme's.
fn split_host_port(host_port: &str) -> Result<(&str, Option<u16>), &'static str> {
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']').ok_or(INVALID)?;
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':').ok_or(INVALID)?)),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Err(INVALID);
    }
    let port = match port {
        None | Some("") => None,
        Some(digits) if digits.bytes().all(|b| b.is_ascii_digit()) && digits.len() <= 5 => {
            match digits.parse::<u16>() {
                Ok(0) | Err(_) => return Err(INVALID),
                Ok(port) => Some(port),
            }
        }
        Some(_) => return Err(INVALID),
    };
    Ok((host, port))
}

/// `%XX` sequences as the bytes they stand for; anything else, a broken sequence included, as is.
fn percent_decoded(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        match (bytes[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                decoded.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    decoded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(url: &str) -> String {
        String::from_utf8(parse(url, "ua").expect("a usable URL").head).unwrap()
    }

    #[test]
    fn a_url_becomes_an_origin_and_a_head_with_path_query_and_credentials() {
        let target = parse("https://user:p%40ss@node.example:8443/v3/abc?x=1#frag", "ua").unwrap();
        assert_eq!(target.origin, Origin { host: "node.example".into(), port: 8443, tls: true });
        let head = String::from_utf8(target.head).unwrap();
        assert!(head.starts_with("POST /v3/abc?x=1 HTTP/1.1\r\nHost: node.example:8443\r\n"));
        assert!(head.contains(&format!("Authorization: Basic {}\r\n", base64::encode("user:p@ss"))));
        assert!(head.ends_with("\r\nContent-Length: "));
    }

    #[test]
    fn ports_default_by_scheme_and_hosts_compare_in_lower_case() {
        assert_eq!(parse("http://[::1]/", "ua").unwrap().origin.port, 80);
        assert!(head("http://[::1]/").starts_with("POST / HTTP/1.1\r\nHost: [::1]\r\n"));
        let target = parse("HTTPS://Node.Example?key=1", "ua").unwrap();
        assert_eq!(target.origin, Origin { host: "node.example".into(), port: 443, tls: true });
        assert!(head("HTTPS://Node.Example?key=1").starts_with("POST /?key=1 HTTP/1.1\r\n"));
    }

    #[test]
    fn unusable_urls_are_refused() {
        for url in [
            "",
            "ftp://node.example/",
            "http:///path",
            "http://node.example:99999/",
            "http://node.example:0/",
            "http://node.example:8x/",
            "node.example",
            "http://node.example/a b",
            "http://node.example/\r\nX-Injected: 1",
            "http://[::1/",
            "http://nöde.example/",
        ] {
            assert!(parse(url, "ua").is_err(), "{url:?} was accepted");
        }
    }

    #[test]
    fn a_request_is_the_head_the_length_a_blank_line_and_the_body() {
        let target = parse("http://node.example/", "ua").unwrap();
        let request = String::from_utf8(target.request(b"{}")).unwrap();
        assert!(request.ends_with("Content-Length: 2\r\n\r\n{}"));
        assert_eq!(request.matches("\r\n").count(), 6);
    }
}
