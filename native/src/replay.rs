//! Replays: a request the Python pipeline answered wholly from the response cache, at no price,
//! is answered again by this server alone when it comes again, under the caller's own ids.
//!
//! The pipeline stays the one place that decides (docs/cache.md, "Replays"). It hands an answer
//! over (`ReplayMemo.install`) only when every call of the request was a cache hit of an answer
//! that can no longer change, free of charge, for a key without a rate limit of its own; what
//! else the answer depended on (the key, its domains, the chain, the method's routes, the
//! chain's finality) changes only with a new snapshot or a purge, and Python clears the memo
//! then. A replay is keyed by every byte the pipeline read: the path, `Origin`, `Referer`,
//! `Content-Type` and the body, with only the values of the calls' `id` members left out; an id
//! is replayed only when it is one that the pipeline echoes byte for byte (an integer of at most
//! 18 digits, a plain ASCII string, null). Any other request goes to the pipeline.
//!
//! Each replay is counted under the token Python gave the answer; `drain` hands the counts over,
//! and Python meters them as the calls they are.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::body::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Body, Response, StatusCode};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::forward::{Flights, Grant};

/// Marks an id's place in a key: a raw control byte, which no body a key matches can hold
/// anywhere else (`scan` refuses them outside whitespace).
const ID_MARK: u8 = 0;
/// Bytes an entry costs beyond its key and answer (its map slot, headers, queue place).
const ENTRY_OVERHEAD: usize = 256;
/// The deepest nesting `scan` follows; the pipeline refuses params nested past 64 levels.
const MAX_DEPTH: usize = 80;
const MAX_ID_BYTES: usize = 64;
/// Requests whose path and header fields together are longer are not replayed.
const MAX_FIELD_BYTES: usize = 4096;
/// Bytes each piece of an answer costs beyond its own (its handle and allocation).
const PIECE_OVERHEAD: usize = 48;
/// The longest a forward is repeated after it was handed over, whatever the memo's `max_age`:
/// what the node answers may change with every block, and the pipeline's closing checks (a
/// node's health, the cache) should see such a call again soon.
pub const FORWARD_MAX_AGE: Duration = Duration::from_secs(1);

/// A request as the server read it: what a replay is keyed by.
pub struct Asked<'a> {
    pub path: &'a str,
    pub origin: Option<&'a str>,
    pub referer: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub body: &'a [u8],
}

struct Entry {
    token: u64,
    kept: Kept,
    size: usize,
    handed: Instant,
    serial: u64, // its place in `order`
}

/// What an entry gives the request it matches.
enum Kept {
    /// An answer, given again.
    Answer {
        status: StatusCode,
        headers: Vec<(HeaderName, HeaderValue)>,
        /// The answer with its ids cut out: `pieces[0] id pieces[1] id ... pieces[n]`.
        pieces: Vec<Bytes>,
    },
    /// A forward, repeated (forward.rs).
    Forward(Arc<Grant>),
}

/// What a request found in the memo.
pub enum Found {
    Replay(Response<Body>),
    /// Send the call to the grant's node under the caller's id (the span of the body given);
    /// `key` names the entry, for `revoke`.
    Forward {
        grant: Arc<Grant>,
        id: (usize, usize),
        key: Arc<[u8]>,
    },
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Arc<[u8]>, Entry>,
    /// Keys, oldest installed first, each with the serial of its install: a key installed
    /// again leaves its older place behind, skipped when reached (and dropped when the places
    /// left behind outnumber the entries).
    order: VecDeque<(Arc<[u8]>, u64)>,
    serials: u64,
    bytes: usize,
    counts: HashMap<u64, u64>, // token -> replays not yet drained
    gone: Vec<u64>,            // tokens no entry holds any more, not yet drained
}

pub struct Memo {
    inner: Mutex<Inner>,
    max_bytes: usize,
    max_body_bytes: usize,
    /// How long an entry is replayed after it was handed over; then the pipeline answers the
    /// request once more (and hands it over again). What the pipeline reads beyond the snapshot
    /// and the purges (whether the cache still holds the answer, the chain's finalized block)
    /// is so never more than this out of step, and a hot answer stays the cache's most recently
    /// used.
    max_age: Duration,
    batch_prefix: String,
    batches: AtomicU64,
    /// Entries held, read without the lock: a request costs nothing here while there are none.
    held: AtomicUsize,
    /// Raised by every `clear`: an answer decided before a clear is not installed after it.
    generation: AtomicU64,
    /// The flights of coalesced calls the repeats take part in (forward.rs).
    pub flights: Flights,
}

impl Memo {
    pub fn new(
        max_bytes: usize,
        max_body_bytes: usize,
        max_age: Duration,
        batch_prefix: String,
    ) -> Memo {
        Memo {
            inner: Mutex::new(Inner::default()),
            max_bytes,
            max_body_bytes,
            max_age,
            batch_prefix,
            batches: AtomicU64::new(0),
            held: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            flights: Flights::default(),
        }
    }

    /// How long a forward is repeated: `max_age`, at most `FORWARD_MAX_AGE`.
    fn forward_max_age(&self) -> Duration {
        self.max_age.min(FORWARD_MAX_AGE)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The answer to `asked`, if it is a replay: status, headers (a fresh `x-batch-id` among
    /// them) and body.
    pub fn replay(&self, asked: &Asked<'_>) -> Option<Response<Body>> {
        match self.lookup(asked)? {
            Found::Replay(response) => Some(response),
            Found::Forward { .. } => None,
        }
    }

    /// What the memo holds for `asked`: a replay, a forward to repeat, or nothing (the
    /// pipeline answers).
    pub fn lookup(&self, asked: &Asked<'_>) -> Option<Found> {
        if self.held.load(Ordering::Relaxed) == 0
            || asked.body.len() > self.max_body_bytes
            || field_bytes(asked) > MAX_FIELD_BYTES
        {
            return None;
        }
        let ids = scan(asked.body)?;
        let key = key_of(asked, &ids);
        let mut inner = self.lock();
        let (stored, entry) = inner.entries.get_key_value(key.as_slice())?;
        let max_age = match entry.kept {
            Kept::Forward(_) => self.forward_max_age(),
            Kept::Answer { .. } => self.max_age,
        };
        if entry.handed.elapsed() >= max_age {
            return None;
        }
        let (status, headers, pieces) = match &entry.kept {
            Kept::Forward(grant) => {
                if ids.len() != 1 {
                    return None;
                }
                let found =
                    Found::Forward { grant: grant.clone(), id: ids[0], key: stored.clone() };
                return Some(found);
            }
            Kept::Answer { status, headers, pieces } => (status, headers, pieces),
        };
        if pieces.len() != ids.len() + 1 {
            return None;
        }
        let mut body = Vec::with_capacity(entry.size);
        for (piece, id) in pieces.iter().zip(ids.iter().map(Some).chain([None])) {
            body.extend_from_slice(piece);
            if let Some(&(start, end)) = id {
                body.extend_from_slice(&asked.body[start..end]);
            }
        }
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = *status;
        let out = response.headers_mut();
        for (name, value) in headers {
            out.append(name.clone(), value.clone());
        }
        let token = entry.token;
        *inner.counts.entry(token).or_insert(0) += 1;
        drop(inner);
        if let Ok(value) = HeaderValue::from_str(&self.next_batch_id()) {
            response.headers_mut().insert(HeaderName::from_static("x-batch-id"), value);
        }
        Some(Found::Replay(response))
    }

    /// The worker's next batch id: one sequence for the pipeline's answers and the replays.
    pub fn next_batch_id(&self) -> String {
        let number = self.batches.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{}{number:x}", self.batch_prefix)
    }

    /// The generation now: read before a request is decided, handed back to `install`.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Keep `answer` (status, headers without `x-batch-id`, body) as the replay of `asked`,
    /// decided in `generation`; false, and nothing kept, when the memo was cleared since, or
    /// the request or the answer is not one a replay can answer alike (an id not echoed byte
    /// for byte, the answer's ids not the request's, too large).
    pub fn install(
        &self,
        token: u64,
        generation: u64,
        asked: &Asked<'_>,
        status: StatusCode,
        headers: Vec<(HeaderName, HeaderValue)>,
        answer: &[u8],
    ) -> bool {
        let fields = field_bytes(asked);
        let header_bytes: usize = headers.iter().map(|(n, v)| n.as_str().len() + v.len()).sum();
        // The entry's size, known before anything is read: an answer too large to keep is not
        // scanned (the server's thread would wait for it).
        let size = fields + asked.body.len() + answer.len() + header_bytes + ENTRY_OVERHEAD;
        if asked.body.len() > self.max_body_bytes
            || fields > MAX_FIELD_BYTES
            || size > self.max_bytes / 4
        {
            return false; // and one answer never takes most of the memo
        }
        let Some(ids) = scan(asked.body) else {
            return false;
        };
        let Some(answered) = scan(answer) else {
            return false;
        };
        let size = size + PIECE_OVERHEAD * (answered.len() + 1);
        if size > self.max_bytes / 4 {
            return false;
        }
        let same = ids.len() == answered.len()
            && ids.iter().zip(&answered).all(|(&(a, b), &(c, d))| asked.body[a..b] == answer[c..d]);
        if !same || ids.is_empty() {
            return false;
        }
        let key: Arc<[u8]> = key_of(asked, &ids).into();
        let mut pieces = Vec::with_capacity(answered.len() + 1);
        let mut from = 0;
        for &(start, end) in &answered {
            pieces.push(Bytes::copy_from_slice(&answer[from..start]));
            from = end;
        }
        pieces.push(Bytes::copy_from_slice(&answer[from..]));
        self.keep(token, generation, key, Kept::Answer { status, headers, pieces }, size)
    }

    /// Repeat `grant` for `asked` (one call), decided in `generation`: the forward the pipeline
    /// made for it, to the same node (forward.rs). False, and nothing kept, when the memo was
    /// cleared since, or the request is not one call with an id echoed byte for byte, or the
    /// body the node was sent does not hold the call's id where the request does.
    pub fn install_forward(&self, generation: u64, asked: &Asked<'_>, grant: Grant) -> bool {
        let fields = field_bytes(asked);
        let size = fields + asked.body.len() + grant.size() + ENTRY_OVERHEAD;
        if asked.body.len() > self.max_body_bytes
            || fields > MAX_FIELD_BYTES
            || size > self.max_bytes / 4
        {
            return false;
        }
        let Some(id) = one_call(asked.body) else {
            return false;
        };
        if asked.body[id.0..id.1] != *grant.sent_id() {
            return false;
        }
        let key: Arc<[u8]> = key_of(asked, &[id]).into();
        let token = grant.token;
        self.keep(token, generation, key, Kept::Forward(Arc::new(grant)), size)
    }

    /// Forget the entry under `key` if it still holds `token`'s: what it repeated failed, or
    /// Python no longer stands by it.
    pub fn revoke(&self, key: &[u8], token: u64) {
        let mut inner = self.lock();
        if inner.entries.get(key).is_some_and(|e| e.token == token) {
            let old = inner.entries.remove(key).expect("just found");
            inner.bytes -= old.size;
            inner.gone.push(old.token);
            self.held.store(inner.entries.len(), Ordering::Relaxed);
        }
    }

    fn keep(&self, token: u64, generation: u64, key: Arc<[u8]>, kept: Kept, size: usize) -> bool {
        let mut inner = self.lock();
        if self.generation.load(Ordering::SeqCst) != generation {
            return false; // cleared while the request was decided: under what it read before
        }
        let forward_max_age = self.forward_max_age();
        let fresh_forward =
            |e: &Entry| matches!(e.kept, Kept::Forward(_)) && e.handed.elapsed() < forward_max_age;
        if matches!(kept, Kept::Forward(_)) && inner.entries.get(&*key).is_some_and(fresh_forward) {
            // Repeated already: the requests the pipeline answered meanwhile (identical calls at
            // once) leave the grant in flight as it is. Checked under the lock that installs.
            return false;
        }
        // Installed again: the new entry takes over the old one's key, so that the place the
        // old one leaves in `order` holds no buffer of its own.
        let key = match inner.entries.remove_entry(&*key) {
            Some((same_key, old)) => {
                inner.bytes -= old.size;
                inner.gone.push(old.token);
                same_key
            }
            None => key,
        };
        while inner.bytes + size > self.max_bytes {
            let Some((oldest, serial)) = inner.order.pop_front() else {
                break;
            };
            if inner.entries.get(&oldest).is_some_and(|e| e.serial == serial) {
                let old = inner.entries.remove(&oldest).expect("just found");
                inner.bytes -= old.size;
                inner.gone.push(old.token);
            }
        }
        inner.serials += 1;
        let serial = inner.serials;
        let handed = Instant::now();
        let entry = Entry { token, kept, size, handed, serial };
        inner.bytes += size;
        inner.order.push_back((key.clone(), serial));
        inner.entries.insert(key, entry);
        if inner.order.len() > 2 * inner.entries.len() + 16 {
            let Inner { entries, order, .. } = &mut *inner;
            order.retain(|(key, serial)| entries.get(key).is_some_and(|e| e.serial == *serial));
        }
        self.held.store(inner.entries.len(), Ordering::Relaxed);
        true
    }

    /// Forget every entry: what they answered may no longer be the pipeline's answer.
    pub fn clear(&self) {
        let mut inner = self.lock();
        self.generation.fetch_add(1, Ordering::SeqCst);
        let tokens: Vec<u64> = inner.entries.values().map(|e| e.token).collect();
        inner.gone.extend(tokens);
        inner.entries.clear();
        inner.order.clear();
        inner.bytes = 0;
        self.held.store(0, Ordering::Relaxed);
    }

    /// The replays counted since the last drain, by token, and the tokens no entry holds any
    /// more (their counts are in this drain or an earlier one).
    pub fn drain(&self) -> (Vec<(u64, u64)>, Vec<u64>) {
        let mut inner = self.lock();
        let counts = inner.counts.drain().collect();
        let gone = std::mem::take(&mut inner.gone);
        (counts, gone)
    }

    pub fn stats(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.entries.len(), inner.bytes)
    }
}

fn field_bytes(asked: &Asked<'_>) -> usize {
    let length = |field: Option<&str>| field.map_or(0, str::len);
    asked.path.len() + length(asked.origin) + length(asked.referer) + length(asked.content_type)
}

/// What a replay is keyed by: the request's header fields, each after its length (or a mark of
/// its absence), so that no two sets of fields run together alike; then the body, each id's
/// value replaced by `ID_MARK`.
fn key_of(asked: &Asked<'_>, ids: &[(usize, usize)]) -> Vec<u8> {
    let mut key = Vec::with_capacity(asked.path.len() + asked.body.len() + 64);
    for field in [Some(asked.path), asked.origin, asked.referer, asked.content_type] {
        match field {
            Some(value) => {
                key.extend_from_slice(&(value.len() as u32).to_le_bytes());
                key.extend_from_slice(value.as_bytes());
            }
            None => key.extend_from_slice(&u32::MAX.to_le_bytes()),
        }
    }
    let mut from = 0;
    for &(start, end) in ids {
        key.extend_from_slice(&asked.body[from..start]);
        key.push(ID_MARK);
        from = end;
    }
    key.extend_from_slice(&asked.body[from..]);
    key
}

/// The spans of the `id` values of a JSON-RPC body: one object, or an array of objects, each
/// with exactly one `id` member whose value is echoed byte for byte (`plain_id`). None for
/// anything else, and for anything that is not JSON (each byte is checked: a key matches only a
/// body that differs from a valid one in its ids alone).
pub fn scan(body: &[u8]) -> Option<Vec<(usize, usize)>> {
    let mut scanner = Scanner { text: body, at: 0, strict: false };
    let mut ids = Vec::new();
    scanner.space();
    match scanner.peek()? {
        b'{' => ids.push(scanner.call()?),
        b'[' => {
            let calls = scanner.array(|scanner| {
                ids.push(scanner.call()?);
                Some(())
            })?;
            if calls == 0 {
                return None; // an empty batch is an error the pipeline answers
            }
        }
        _ => return None,
    }
    scanner.space();
    (scanner.at == body.len()).then_some(ids)
}

/// The span of the id of `body` if it is one call (an object, not a batch, even of one: its
/// answer is an array) with a plain id.
pub fn one_call(body: &[u8]) -> Option<(usize, usize)> {
    let first = body.iter().find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))?;
    match scan(body)?[..] {
        [id] if *first == b'{' => Some(id),
        _ => None,
    }
}

/// The span of the `result` of `answer` if it is a plain JSON-RPC answer to the call with id
/// `id` (its bytes as sent): one object whose members are exactly `"jsonrpc":"2.0"`, the `id`
/// with those bytes and a `result`, each once, and valid JSON throughout. None for anything else
/// (an error, another id, extra members, names with escapes): the pipeline's to judge. Strict
/// (`Scanner::strict`): numbers with an exponent and escapes of surrogates are refused too.
pub fn plain_answer(answer: &[u8], id: &[u8]) -> Option<(usize, usize)> {
    let mut scanner = Scanner { text: answer, at: 0, strict: true };
    scanner.space();
    if scanner.peek() != Some(b'{') {
        return None;
    }
    let (mut version, mut echoed, mut result) = (false, false, None);
    scanner.object(0, |(name_start, name_end), (start, end)| {
        let value = &answer[start..end];
        match &answer[name_start..name_end] {
            b"\"jsonrpc\"" if value == b"\"2.0\"" && !version => version = true,
            b"\"id\"" if value == id && !echoed => echoed = true,
            b"\"result\"" if result.is_none() => result = Some((start, end)),
            _ => return None, // another member, another value, or a member twice
        }
        Some(())
    })?;
    scanner.space();
    (scanner.at == answer.len() && version && echoed).then_some(result?)
}

/// The block number an `eth_blockNumber` result spells: a quoted `0x` and 1 to 16 hex digits.
pub fn hex_quantity(result: &[u8]) -> Option<u64> {
    let digits = result.strip_prefix(b"\"0x")?.strip_suffix(b"\"")?;
    // `from_str_radix` would also take a leading `+`.
    if digits.is_empty() || digits.len() > 16 || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

pub(crate) struct Scanner<'a> {
    text: &'a [u8],
    at: usize,
    /// Refuse also what Python's parser (orjson) refuses or the pipeline would reject in an
    /// answer: a number with an exponent (`1e999` overflows; Ethereum's answers never have
    /// one) and a `\u` escape of a surrogate, paired or not (a valid pair refused only sends
    /// the call to the pipeline). For `plain_answer` only.
    strict: bool,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// One call: an object with exactly one plain `id` member; the span of its value. A member
    /// name with an escape is refused: `"\u0069d"` is `id` to the pipeline's parser, which
    /// takes the last of two.
    fn call(&mut self) -> Option<(usize, usize)> {
        if self.peek()? != b'{' {
            return None;
        }
        let text = self.text;
        let mut id = None;
        self.object(0, |(name_start, name_end), (start, end)| {
            let name = &text[name_start..name_end];
            if name.contains(&b'\\') {
                return None;
            }
            if name == b"\"id\"" {
                if id.is_some() || !plain_id(&text[start..end]) {
                    return None;
                }
                id = Some((start, end));
            }
            Some(())
        })?;
        id // None for an object without one: a notification, or `{}`
    }

    /// An object, from its `{`: each member's name (quotes included) and value, as spans, to
    /// `member`, which refuses the object by giving None.
    fn object(
        &mut self,
        depth: usize,
        mut member: impl FnMut((usize, usize), (usize, usize)) -> Option<()>,
    ) -> Option<()> {
        self.at += 1;
        self.space();
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            self.space();
            let name = self.string()?;
            self.space();
            if self.next()? != b':' {
                return None;
            }
            self.space();
            let start = self.at;
            self.value(depth + 1)?;
            member(name, (start, self.at))?;
            self.space();
            match self.next()? {
                b',' => continue,
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// An array, from its `[`, each item read by `item`; how many there were.
    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<usize> {
        self.at += 1;
        self.space();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(0);
        }
        let mut items = 0;
        loop {
            self.space();
            item(self)?;
            items += 1;
            self.space();
            match self.next()? {
                b',' => continue,
                b']' => return Some(items),
                _ => return None,
            }
        }
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => self.object(depth, |_, _| Some(())),
            b'[' => self.array(|scanner| scanner.value(depth + 1)).map(|_| ()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.text.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// JSON's number grammar.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            if self.strict {
                return None;
            }
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.some_digits()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }

    /// A string, its span with the quotes. Escapes are checked; raw control bytes refused;
    /// UTF-8 checked.
    fn string(&mut self) -> Option<(usize, usize)> {
        let start = self.at;
        if self.next()? != b'"' {
            return None;
        }
        loop {
            match self.next()? {
                b'"' => break,
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        let hex = self.text.get(self.at..self.at + 4)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        if self.strict {
                            let unit = u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16);
                            if (0xd800..=0xdfff).contains(&unit.ok()?) {
                                return None;
                            }
                        }
                        self.at += 4;
                    }
                    _ => return None,
                },
                0..=0x1f => return None,
                _ => {}
            }
        }
        std::str::from_utf8(&self.text[start..self.at]).ok()?;
        Some((start, self.at))
    }
}

/// An id the pipeline echoes exactly as sent: an integer without sign tricks (no `-0`, no
/// leading zero) of at most 18 digits (within 64 bits), `null`, or a string of printable ASCII
/// without escapes.
fn plain_id(value: &[u8]) -> bool {
    match value {
        b"null" | b"0" => true,
        [b'"', inner @ .., b'"'] => {
            inner.len() <= MAX_ID_BYTES
                && inner.iter().all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        }
        _ => {
            let digits = value.strip_prefix(b"-").unwrap_or(value);
            !digits.is_empty()
                && digits.len() <= 18
                && digits[0] != b'0'
                && digits.iter().all(u8::is_ascii_digit)
        }
    }
}

/// Whether `answer` is a plain answer to the one call in `sent`.
fn answered_plainly(answer: &[u8], sent: &[u8]) -> bool {
    one_call(sent).is_some_and(|(start, end)| plain_answer(answer, &sent[start..end]).is_some())
}

fn header_pairs(headers: Vec<(String, String)>) -> PyResult<Vec<(HeaderName, HeaderValue)>> {
    let mut pairs = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| PyValueError::new_err(format!("bad header name {name:?}")))?;
        let value = HeaderValue::from_str(&value)
            .map_err(|_| PyValueError::new_err(format!("bad value for header {name}")))?;
        pairs.push((name, value));
    }
    Ok(pairs)
}

/// A replay as Python reads it: status, headers, body.
type Replayed = (u16, Vec<(String, String)>, PyObject);

/// The memo as Python holds it (router/replay.py), shared with the server that replays from it.
#[pyclass(module = "chainrouter._native")]
pub struct ReplayMemo {
    pub memo: Arc<Memo>,
}

#[pymethods]
impl ReplayMemo {
    #[new]
    fn new(
        max_bytes: usize,
        max_body_bytes: usize,
        max_age_s: f64,
        batch_prefix: String,
    ) -> PyResult<Self> {
        let max_age = crate::driver::seconds(max_age_s)?;
        Ok(ReplayMemo {
            memo: Arc::new(Memo::new(max_bytes, max_body_bytes, max_age, batch_prefix)),
        })
    }

    #[allow(clippy::too_many_arguments)] // the request's fields, then the answer's, each named
    fn install(
        &self,
        py: Python<'_>,
        token: u64,
        generation: u64,
        path: &str,
        origin: Option<&str>,
        referer: Option<&str>,
        content_type: Option<&str>,
        body: &[u8],
        status: u16,
        headers: Vec<(String, String)>,
        answer: &[u8],
    ) -> PyResult<bool> {
        let status = StatusCode::from_u16(status)
            .map_err(|_| PyValueError::new_err(format!("{status} is not an HTTP status")))?;
        let pairs = header_pairs(headers)?;
        let asked = Asked { path, origin, referer, content_type, body };
        Ok(py.allow_threads(|| self.memo.install(token, generation, &asked, status, pairs, answer)))
    }

    /// Repeat the forward of `body`'s one call: `sent` to `url` within `timeout_s`, its answer
    /// given with `headers` (forward.rs), if the node's `answer` to it was a plain one (a
    /// `result`, under the id sent). False when not kept.
    #[allow(clippy::too_many_arguments)] // the request's fields, then the forward's, each named
    fn install_forward(
        &self,
        py: Python<'_>,
        token: u64,
        generation: u64,
        path: &str,
        origin: Option<&str>,
        referer: Option<&str>,
        content_type: Option<&str>,
        body: &[u8],
        url: String,
        sent: &[u8],
        answer: &[u8],
        timeout_s: f64,
        headers: Vec<(String, String)>,
        flight: Option<String>,
        hand_head: bool,
    ) -> PyResult<bool> {
        let timeout = crate::driver::seconds(timeout_s)?;
        // Answers can be megabytes: scanned without the GIL.
        if !py.allow_threads(|| answered_plainly(answer, sent)) {
            return Ok(false); // an error, or not one a repeat could check: not repeated
        }
        let headers = header_pairs(headers)?;
        let Some(grant) = Grant::new(token, url, sent, timeout, headers, flight, hand_head) else {
            return Ok(false);
        };
        let asked = Asked { path, origin, referer, content_type, body };
        Ok(py.allow_threads(|| self.memo.install_forward(generation, &asked, grant)))
    }

    /// A call of the pipeline leads the flight `flight` (its coalescing key): until it has
    /// `landed`, repeats of grants with that flight key go to the pipeline, which joins them.
    fn flying(&self, flight: &str) {
        self.memo.flights.flying(flight);
    }

    /// The pipeline's call that led `flight` has ended.
    fn landed(&self, flight: &str) {
        self.memo.flights.landed(flight);
    }

    /// If a repeat leads the flight `flight` now, make `future` one of its followers (handed
    /// back to the host's `settle` with the repeat) and give true; else false.
    fn follow(&self, flight: &str, future: PyObject) -> bool {
        self.memo.flights.follow(flight, future)
    }

    /// Whether the memo would repeat a forward for this request: for the tests.
    fn holds_forward(
        &self,
        path: &str,
        origin: Option<&str>,
        referer: Option<&str>,
        content_type: Option<&str>,
        body: &[u8],
    ) -> bool {
        let asked = Asked { path, origin, referer, content_type, body };
        matches!(self.memo.lookup(&asked), Some(Found::Forward { .. }))
    }

    /// The replay of a request, as the server would write it: `(status, headers, body)`, or
    /// None when the pipeline must answer it. For the tests.
    fn replay(
        &self,
        py: Python<'_>,
        path: &str,
        origin: Option<&str>,
        referer: Option<&str>,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Option<Replayed> {
        let asked = Asked { path, origin, referer, content_type, body };
        let response = self.memo.replay(&asked)?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread().build().ok()?;
        let bytes = runtime.block_on(hyper::body::to_bytes(response.into_body())).ok()?;
        Some((status, headers, PyBytes::new(py, &bytes).into()))
    }

    fn clear(&self) {
        self.memo.clear();
    }

    /// The worker's next batch id (the pipeline's answers take theirs from here too).
    fn next_batch_id(&self) -> String {
        self.memo.next_batch_id()
    }

    /// Read before a request is decided; `install` refuses its answer after a `clear`.
    fn generation(&self) -> u64 {
        self.memo.generation()
    }

    fn drain(&self) -> (Vec<(u64, u64)>, Vec<u64>) {
        self.memo.drain()
    }

    /// `(entries, bytes)` held now.
    fn stats(&self) -> (usize, usize) {
        self.memo.stats()
    }

    /// The ids' spans `scan` finds in `body`, or None: for the tests' property checks.
    #[staticmethod]
    fn scan_ids(body: &[u8]) -> Option<Vec<(usize, usize)>> {
        scan(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGE: Duration = Duration::from_secs(60);
    const CALL: &[u8] = br#"{"jsonrpc":"2.0","id":7,"method":"eth_chainId","params":[]}"#;
    const ANSWER: &[u8] = br#"{"jsonrpc":"2.0","id":7,"result":"0x1"}"#;

    fn asked(body: &[u8]) -> Asked<'_> {
        Asked {
            path: "/rpc/1/crk_x",
            origin: Some("https://app.example"),
            referer: None,
            content_type: Some("application/json"),
            body,
        }
    }

    fn memo() -> Memo {
        Memo::new(1 << 20, 8192, AGE, "abc-r".into())
    }

    fn body_of(response: Response<Body>) -> Vec<u8> {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(hyper::body::to_bytes(response.into_body())).unwrap().to_vec()
    }

    #[test]
    fn ids_are_found_in_a_call_and_in_each_call_of_a_batch() {
        assert_eq!(scan(CALL), Some(vec![(22, 23)]));
        let batch = br#" [ {"id":"a","method":"m"} , {"method":"m","id":null} ] "#;
        let ids = scan(batch).unwrap();
        let values: Vec<&[u8]> = ids.iter().map(|&(s, e)| &batch[s..e]).collect();
        assert_eq!(values, vec![&b"\"a\""[..], &b"null"[..]]);
    }

    #[test]
    fn an_id_inside_params_is_not_the_calls_id() {
        let body = br#"{"params":[{"id":1}],"id":2}"#;
        let ids = scan(body).unwrap();
        assert_eq!(&body[ids[0].0..ids[0].1], b"2");
    }

    #[test]
    fn ids_echoed_other_than_as_sent_are_not_replayed() {
        for id in ["1.0", "-0", "01", "1e3", r#""\u0041""#, "[1]", "1234567890123456789", "true"] {
            let body = format!(r#"{{"id":{id},"method":"m"}}"#);
            assert_eq!(scan(body.as_bytes()), None, "{id}");
        }
        assert_eq!(scan(br#"{"id":1,"id":2}"#), None); // twice
        assert_eq!(scan(br#"{"id":1,"\u0069d":2}"#), None); // twice, once escaped
        assert_eq!(scan(br#"{"method":"m"}"#), None); // a notification
    }

    #[test]
    fn what_is_not_json_is_not_scanned() {
        for body in [
            &br#"{"id":1,"method":"m""#[..],
            br#"{"id":1,"method":"m\x"}"#,
            b"{\"id\":1,\"method\":\"m\x01\"}",
            br#"{"id":1,"params":[1,]}"#,
            br#"{"id":1} x"#,
            b"{\"id\":1,\"m\":\"\xff\"}",
            br#"[]"#,
            br#"{}"#,
        ] {
            assert_eq!(scan(body), None, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn a_replay_is_the_answer_under_the_callers_id_with_a_fresh_batch_id() {
        let memo = memo();
        let headers = vec![(HeaderName::from_static("x-cache"), HeaderValue::from_static("HIT"))];
        assert!(memo.install(9, 0, &asked(CALL), StatusCode::OK, headers, ANSWER));
        let again = br#"{"jsonrpc":"2.0","id":"q-1","method":"eth_chainId","params":[]}"#;
        let response = memo.replay(&asked(again)).unwrap();
        assert_eq!(response.headers()["x-cache"], "HIT");
        assert_eq!(response.headers()["x-batch-id"], "abc-r1");
        assert_eq!(memo.next_batch_id(), "abc-r2"); // one sequence with the pipeline's
        assert_eq!(body_of(response), br#"{"jsonrpc":"2.0","id":"q-1","result":"0x1"}"#);
        assert_eq!(memo.drain(), (vec![(9, 1)], vec![]));
    }

    #[test]
    fn anything_else_that_differs_is_not_a_replay() {
        let memo = memo();
        assert!(memo.install(1, 0, &asked(CALL), StatusCode::OK, vec![], ANSWER));
        let other_params = br#"{"jsonrpc":"2.0","id":7,"method":"eth_chainId","params":[1]}"#;
        assert!(memo.replay(&asked(other_params)).is_none());
        let spaced = br#"{"jsonrpc":"2.0", "id":7,"method":"eth_chainId","params":[]}"#;
        assert!(memo.replay(&asked(spaced)).is_none());
        let elsewhere = Asked { origin: Some("https://evil.example"), ..asked(CALL) };
        assert!(memo.replay(&elsewhere).is_none());
        let no_origin = Asked { origin: None, ..asked(CALL) };
        assert!(memo.replay(&no_origin).is_none());
        let other_key = Asked { path: "/rpc/1/crk_y", ..asked(CALL) };
        assert!(memo.replay(&other_key).is_none());
        let text = Asked { content_type: Some("text/plain"), ..asked(CALL) };
        assert!(memo.replay(&text).is_none());
        assert!(memo.replay(&asked(CALL)).is_some());
    }

    #[test]
    fn an_answer_whose_ids_are_not_the_requests_is_not_kept() {
        let memo = memo();
        let other = br#"{"jsonrpc":"2.0","id":8,"result":"0x1"}"#;
        assert!(!memo.install(1, 0, &asked(CALL), StatusCode::OK, vec![], other));
        let batch = br#"[{"id":1,"method":"a"},{"id":2,"method":"b"}]"#;
        let swapped = br#"[{"id":2,"result":"b"},{"id":1,"result":"a"}]"#;
        assert!(!memo.install(1, 0, &asked(batch), StatusCode::OK, vec![], swapped));
        assert_eq!(memo.stats().0, 0);
    }

    #[test]
    fn a_batch_is_replayed_with_each_callers_id_in_place() {
        let memo = memo();
        let batch = br#"[{"id":1,"method":"a"},{"id":2,"method":"b"}]"#;
        let answer = br#"[{"id":1,"result":{"id":5}},{"id":2,"result":"b"}]"#;
        assert!(memo.install(3, 0, &asked(batch), StatusCode::OK, vec![], answer));
        let again = br#"[{"id":"x","method":"a"},{"id":null,"method":"b"}]"#;
        let response = memo.replay(&asked(again)).unwrap();
        assert_eq!(
            body_of(response),
            br#"[{"id":"x","result":{"id":5}},{"id":null,"result":"b"}]"#
        );
    }

    #[test]
    fn the_oldest_entries_go_first_past_the_bound_and_their_tokens_are_given_back() {
        let memo = Memo::new(4 * (ENTRY_OVERHEAD + 300), 8192, AGE, "p-".into());
        for token in 0..6u64 {
            let body = format!(r#"{{"id":1,"method":"m{token}"}}"#);
            let answer = br#"{"id":1,"result":"0x1"}"#;
            assert!(memo.install(
                token,
                0,
                &asked(body.as_bytes()),
                StatusCode::OK,
                vec![],
                answer
            ));
        }
        let (entries, bytes) = memo.stats();
        assert!(entries < 6 && bytes <= 4 * (ENTRY_OVERHEAD + 300), "{entries} {bytes}");
        let (_, gone) = memo.drain();
        assert_eq!(gone.len(), 6 - entries);
        assert_eq!(gone[0], 0);
        assert!(memo.replay(&asked(br#"{"id":1,"method":"m5"}"#)).is_some());
        assert!(memo.replay(&asked(br#"{"id":1,"method":"m0"}"#)).is_none());
    }

    #[test]
    fn clearing_forgets_every_entry_but_keeps_the_counts_for_the_drain() {
        let memo = memo();
        assert!(memo.install(4, 0, &asked(CALL), StatusCode::OK, vec![], ANSWER));
        assert!(memo.replay(&asked(CALL)).is_some());
        memo.clear();
        assert!(memo.replay(&asked(CALL)).is_none());
        assert_eq!(memo.drain(), (vec![(4, 1)], vec![4]));
        assert_eq!(memo.stats(), (0, 0));
    }

    #[test]
    fn an_answer_decided_before_a_clear_is_not_installed_after_it() {
        let memo = memo();
        let decided_in = memo.generation();
        memo.clear();
        assert!(!memo.install(1, decided_in, &asked(CALL), StatusCode::OK, vec![], ANSWER));
        assert!(memo.install(1, memo.generation(), &asked(CALL), StatusCode::OK, vec![], ANSWER));
    }

    #[test]
    fn an_entry_is_replayed_for_its_age_then_left_to_the_pipeline() {
        let memo = memo();
        assert!(memo.install(1, 0, &asked(CALL), StatusCode::OK, vec![], ANSWER));
        memo.lock().entries.values_mut().for_each(|e| e.handed -= AGE);
        assert!(memo.replay(&asked(CALL)).is_none());
        assert!(memo.install(2, 0, &asked(CALL), StatusCode::OK, vec![], ANSWER));
        assert!(memo.replay(&asked(CALL)).is_some());
        assert_eq!(memo.drain(), (vec![(2, 1)], vec![1]));
    }

    #[test]
    fn installing_the_same_request_again_and_again_keeps_the_order_bounded() {
        let memo = memo();
        for token in 0..1000 {
            assert!(memo.install(token, 0, &asked(CALL), StatusCode::OK, vec![], ANSWER));
        }
        let inner = memo.lock();
        assert_eq!(inner.entries.len(), 1);
        assert!(inner.order.len() <= 2 + 16, "{}", inner.order.len());
    }

    #[test]
    fn long_header_fields_are_neither_kept_nor_replayed() {
        let memo = memo();
        let long = "x".repeat(MAX_FIELD_BYTES);
        let referred = Asked { referer: Some(&long), ..asked(CALL) };
        assert!(!memo.install(1, 0, &referred, StatusCode::OK, vec![], ANSWER));
        assert!(memo.install(2, 0, &asked(CALL), StatusCode::OK, vec![], ANSWER));
        assert!(memo.replay(&referred).is_none()); // held entries or not, never keyed
    }

    #[test]
    fn reinstalls_and_evictions_keep_the_bytes_the_sum_of_the_entries_and_every_entry_evictable() {
        let memo = Memo::new(8 * (ENTRY_OVERHEAD + 300), 8192, AGE, "p-".into());
        for round in 0..200u64 {
            let body = format!(r#"{{"id":1,"method":"m{}"}}"#, round % 13);
            let answer = br#"{"id":1,"result":"0x1"}"#;
            assert!(memo.install(
                round,
                0,
                &asked(body.as_bytes()),
                StatusCode::OK,
                vec![],
                answer
            ));
            let inner = memo.lock();
            let sum: usize = inner.entries.values().map(|e| e.size).sum();
            assert_eq!(inner.bytes, sum);
            assert!(inner.bytes <= 8 * (ENTRY_OVERHEAD + 300));
            for (key, entry) in &inner.entries {
                let places = inner.order.iter().filter(|(k, s)| k == key && *s == entry.serial);
                assert_eq!(places.count(), 1, "every entry has its one place in the order");
            }
            for (key, _) in &inner.order {
                if let Some((live, _)) = inner.entries.get_key_value(key) {
                    assert!(Arc::ptr_eq(live, key), "a place left behind shares its entry's key");
                }
            }
            assert!(inner.order.len() <= 2 * inner.entries.len() + 16);
        }
    }

    #[test]
    fn a_body_past_the_bound_is_neither_kept_nor_replayed() {
        let memo = Memo::new(1 << 20, CALL.len() - 1, AGE, "p-".into());
        assert!(!memo.install(1, 0, &asked(CALL), StatusCode::OK, vec![], ANSWER));
    }

    // plain_answer: what a repeat may give.

    const PLAIN: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":"0x1"}"#;

    fn result_of<'a>(answer: &'a [u8], id: &[u8]) -> Option<&'a [u8]> {
        plain_answer(answer, id).map(|(start, end)| &answer[start..end])
    }

    #[test]
    fn a_plain_answer_is_jsonrpc_2_0_the_id_as_sent_and_a_result_and_its_result_is_spanned() {
        assert_eq!(result_of(PLAIN, b"1"), Some(&b"\"0x1\""[..]));
        let spaced =
            b" \r\n{ \"result\" :\t{\"a\":[1,{\"id\":2}]} ,\"id\" : 1 , \"jsonrpc\":\"2.0\" }\n ";
        assert_eq!(result_of(spaced, b"1"), Some(&br#"{"a":[1,{"id":2}]}"#[..]));
        let named = br#"{"jsonrpc":"2.0","id":"q-1","result":null}"#;
        assert_eq!(result_of(named, b"\"q-1\""), Some(&b"null"[..]));
        let none = br#"{"id":null,"jsonrpc":"2.0","result":[]}"#;
        assert_eq!(result_of(none, b"null"), Some(&b"[]"[..]));
    }

    #[test]
    fn an_error_an_extra_member_a_missing_one_or_one_twice_is_not_a_plain_answer() {
        for answer in [
            &br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"x"}}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"result":"0x1","error":null}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":"0x1","x":1}"#,
            br#"{"jsonrpc":"2.0","id":1}"#,         // no result
            br#"{"id":1,"result":"0x1"}"#,          // no jsonrpc
            br#"{"jsonrpc":"2.0","result":"0x1"}"#, // no id
            br#"{"jsonrpc":"2.0","id":1,"result":"0x1","result":"0x2"}"#,
            br#"{"jsonrpc":"2.0","id":1,"id":1,"result":"0x1"}"#,
            br#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"result":"0x1"}"#,
            br#"{"JSONRPC":"2.0","id":1,"result":"0x1"}"#,
            br#"{}"#,
        ] {
            assert_eq!(plain_answer(answer, b"1"), None, "{}", String::from_utf8_lossy(answer));
        }
    }

    #[test]
    fn an_answer_under_any_other_id_bytes_than_those_sent_is_not_plain() {
        for (answer_id, sent_id) in [
            ("2", "1"),
            ("1.0", "1"),
            ("1", "1.0"),
            ("\"1\"", "1"),
            ("1", "\"1\""),
            ("null", "1"),
            ("1", "null"),
            ("\"a\"", "\"A\""),
            ("\"\\u0061\"", "\"a\""),
            ("10", "1"),
        ] {
            let answer = format!(r#"{{"jsonrpc":"2.0","id":{answer_id},"result":"0x1"}}"#);
            assert_eq!(plain_answer(answer.as_bytes(), sent_id.as_bytes()), None, "{answer}");
        }
    }

    #[test]
    fn jsonrpc_is_plain_only_as_the_string_2_0() {
        for version in ["\"1.0\"", "2.0", "\"2.0 \"", "\"2\"", "null", "\"2\\u002e0\""] {
            let answer = format!(r#"{{"jsonrpc":{version},"id":1,"result":"0x1"}}"#);
            assert_eq!(plain_answer(answer.as_bytes(), b"1"), None, "{answer}");
        }
    }

    #[test]
    fn an_answer_that_is_not_one_valid_json_object_is_not_plain() {
        for answer in [
            &br#"{"jsonrpc":"2.0","id":1,"result":"0x1"} x"#[..],
            br#"{"jsonrpc":"2.0","id":1,"result":"0x1"}{}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":"0x1"},"#,
            br#"{"jsonrpc":"2.0","id":1,"result":[1,]}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":01}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":"\x"}"#,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\x01\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xff\"}",
            br#"{"jsonrpc":"2.0","id":1,"result":tru}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":"0x1",}"#,
            br#"[{"jsonrpc":"2.0","id":1,"result":"0x1"}]"#,
            br#""{\"jsonrpc\":\"2.0\"}""#,
            b"null",
            b"",
            b"   ",
        ] {
            assert_eq!(plain_answer(answer, b"1"), None, "{}", String::from_utf8_lossy(answer));
        }
    }

    #[test]
    fn no_truncation_of_a_plain_answer_is_plain() {
        let answer =
            br#"{"jsonrpc":"2.0","id":12,"result":{"n":-1.5,"s":"a\"b\u00e9","l":[true,null]}}"#;
        assert!(plain_answer(answer, b"12").is_some());
        for end in 0..answer.len() {
            assert_eq!(plain_answer(&answer[..end], b"12"), None, "{end}");
        }
    }

    #[test]
    fn plain_answer_refuses_numbers_with_an_exponent_and_escapes_of_surrogates() {
        for result in [
            "1e999",
            "1E3",
            "-2.5e-3",
            "0e0",
            r#"{"n":[1,2e+1]}"#,
            r#""\ud83d\ude00""#, // a valid pair: refused all the same
            r#""\uD83D\uDE00""#,
            r#""\ud800""#,
            r#""a\udfffb""#,
            r#"{"\udc00":1}"#,
        ] {
            let answer = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#);
            assert_eq!(result_of(answer.as_bytes(), b"1"), None, "{result}");
        }
        for result in ["1", "-1.5", "0", r#""\u00e9\ud7ff\ue000\uFFFF""#, r#""e1E""#] {
            let answer = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#);
            assert_eq!(result_of(answer.as_bytes(), b"1"), Some(result.as_bytes()), "{result}");
        }
        // Requests are scanned as before: the pipeline parses those itself.
        assert!(
            scan(br#"{"id":1,"method":"m","params":[1e999,"\ud800","\ud83d\ude00"]}"#).is_some()
        );
    }

    #[test]
    fn member_names_with_escapes_are_not_plain_even_when_they_spell_the_right_name() {
        for answer in [
            &br#"{"jsonrpc":"2.0","id":1,"\u0072esult":"0x1"}"#[..],
            br#"{"jsonrp\u0063":"2.0","id":1,"result":"0x1"}"#,
            br#"{"jsonrpc":"2.0","i\u0064":1,"result":"0x1"}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":"0x1","\u0065rror":null}"#,
        ] {
            assert_eq!(plain_answer(answer, b"1"), None, "{}", String::from_utf8_lossy(answer));
        }
    }

    // hex_quantity: the block an eth_blockNumber's result names.

    #[test]
    fn a_hex_quantity_is_a_quoted_0x_and_1_to_16_hex_digits() {
        assert_eq!(hex_quantity(b"\"0x0\""), Some(0));
        assert_eq!(hex_quantity(b"\"0x10\""), Some(16));
        assert_eq!(hex_quantity(b"\"0x1b4\""), Some(436));
        assert_eq!(hex_quantity(b"\"0x0000000000000001\""), Some(1)); // 16 digits
        assert_eq!(hex_quantity(b"\"0xffffffffffffffff\""), Some(u64::MAX));
        // Upper case digits are hex digits to `from_str_radix`, and so here.
        assert_eq!(hex_quantity(b"\"0xABCDEF\""), Some(0xabcdef));
        assert_eq!(hex_quantity(b"\"0xAbC\""), Some(0xabc));
    }

    #[test]
    fn anything_else_is_no_hex_quantity() {
        for result in [
            &b"\"0x00000000000000001\""[..], // 17 digits, however small
            b"\"0x10000000000000000\"",
            b"0x10",     // not quoted
            b"\"0x10",   // quoted on one side
            b"\"0x\"",   // no digits
            b"\"0xg\"",  // not hex
            b"\"10\"",   // no 0x
            b"\"0X10\"", // 0X
            b"\"0x+1\"", // a sign, which `from_str_radix` alone would take
            b"\"0x-1\"",
            b"\"0x 1\"",
            b"\"0x1 \"",
            b"\"0x1_0\"",
            b"16",
            b"null",
            b"",
        ] {
            assert_eq!(hex_quantity(result), None, "{}", String::from_utf8_lossy(result));
        }
    }

    // Forwards in the memo.

    const FORWARDED: &[u8] =
        br#"{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab","latest"]}"#;

    fn grant(token: u64, sent: &[u8]) -> Grant {
        let url = "http://node.example/rpc".to_string();
        Grant::new(token, url, sent, Duration::from_secs(1), vec![], None, false).unwrap()
    }

    fn forward(token: u64) -> Grant {
        grant(token, FORWARDED)
    }

    /// The forward `body` finds: its grant's token, the caller's id, the entry's key.
    fn found(memo: &Memo, asked: &Asked<'_>) -> Option<(u64, Vec<u8>, Arc<[u8]>)> {
        match memo.lookup(asked)? {
            Found::Forward { grant, id, key } => {
                Some((grant.token, asked.body[id.0..id.1].to_vec(), key))
            }
            Found::Replay(_) => panic!("a replay where a forward was expected"),
        }
    }

    fn forward_size(asked: &Asked<'_>, grant: &Grant) -> usize {
        field_bytes(asked) + asked.body.len() + grant.size() + ENTRY_OVERHEAD
    }

    fn bytes_are_the_sum_of_the_entries(memo: &Memo) {
        let inner = memo.lock();
        let sum: usize = inner.entries.values().map(|e| e.size).sum();
        assert_eq!(inner.bytes, sum);
    }

    #[test]
    fn a_forward_is_found_for_the_same_request_under_another_id_with_the_callers_id() {
        let memo = memo();
        assert!(memo.install_forward(0, &asked(FORWARDED), forward(5)));
        let again =
            br#"{"jsonrpc":"2.0","id":"q-1","method":"eth_getBalance","params":["0xab","latest"]}"#;
        let (token, id, key) = found(&memo, &asked(again)).unwrap();
        assert_eq!((token, &id[..]), (5, &b"\"q-1\""[..]));
        assert_eq!(&*key, &key_of(&asked(again), &scan(again).unwrap())[..]);
        let (_, id, _) = found(&memo, &asked(FORWARDED)).unwrap();
        assert_eq!(id, b"7");
        let null =
            br#"{"jsonrpc":"2.0","id":null,"method":"eth_getBalance","params":["0xab","latest"]}"#;
        assert_eq!(found(&memo, &asked(null)).unwrap().1, b"null");
    }

    #[test]
    fn a_forward_is_neither_a_replay_nor_counted_as_one() {
        let memo = memo();
        assert!(memo.install_forward(0, &asked(FORWARDED), forward(5)));
        assert!(memo.replay(&asked(FORWARDED)).is_none());
        assert!(found(&memo, &asked(FORWARDED)).is_some());
        assert_eq!(memo.drain(), (vec![], vec![]), "settle bills repeats, not the drain");
    }

    #[test]
    fn a_request_that_differs_from_a_forwards_in_anything_but_the_id_finds_nothing() {
        let memo = memo();
        assert!(memo.install_forward(0, &asked(FORWARDED), forward(1)));
        for body in [
            &br#"{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xac","latest"]}"#[..],
            br#"{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab","latest"]} "#,
            br#"{"jsonrpc":"2.0", "id":7,"method":"eth_getBalance","params":["0xab","latest"]}"#,
            br#"{"jsonrpc":"2.0","id":7,"method":"eth_getbalance","params":["0xab","latest"]}"#,
            br#"[{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab","latest"]}]"#,
        ] {
            assert!(memo.lookup(&asked(body)).is_none(), "{}", String::from_utf8_lossy(body));
        }
        let others = [
            Asked { path: "/rpc/1/crk_y", ..asked(FORWARDED) },
            Asked { path: "/rpc/10/crk_x", ..asked(FORWARDED) },
            Asked { origin: Some("https://evil.example"), ..asked(FORWARDED) },
            Asked { origin: None, ..asked(FORWARDED) },
            Asked { referer: Some("https://app.example/"), ..asked(FORWARDED) },
            Asked { referer: Some(""), ..asked(FORWARDED) },
            Asked { content_type: Some("text/plain"), ..asked(FORWARDED) },
            Asked { content_type: None, ..asked(FORWARDED) },
        ];
        for other in &others {
            assert!(memo.lookup(other).is_none());
        }
        assert!(found(&memo, &asked(FORWARDED)).is_some());
    }

    #[test]
    fn a_forward_is_kept_only_for_one_call_whose_id_the_node_was_sent() {
        let memo = memo();
        let batch_of_one =
            br#"[{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab","latest"]}]"#;
        assert!(!memo.install_forward(0, &asked(batch_of_one), forward(1)));
        let batch = br#"[{"id":7,"method":"a"},{"id":8,"method":"b"}]"#;
        assert!(!memo.install_forward(0, &asked(batch), forward(1)));
        let notification =
            br#"{"jsonrpc":"2.0","method":"eth_getBalance","params":["0xab","latest"]}"#;
        assert!(!memo.install_forward(0, &asked(notification), forward(1)));
        let not_plain =
            br#"{"jsonrpc":"2.0","id":7.0,"method":"eth_getBalance","params":["0xab","latest"]}"#;
        assert!(!memo.install_forward(0, &asked(not_plain), forward(1)));
        let broken =
            br#"{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab","latest"]"#;
        assert!(!memo.install_forward(0, &asked(broken), forward(1)));
        // The node was sent another id than the request's.
        let sent =
            br#"{"jsonrpc":"2.0","id":8,"method":"eth_getBalance","params":["0xab","latest"]}"#;
        assert!(!memo.install_forward(0, &asked(FORWARDED), grant(1, sent)));
        let sent =
            br#"{"jsonrpc":"2.0","id":"7","method":"eth_getBalance","params":["0xab","latest"]}"#;
        assert!(!memo.install_forward(0, &asked(FORWARDED), grant(1, sent)));
        assert_eq!(memo.stats(), (0, 0));
        assert_eq!(memo.drain(), (vec![], vec![]), "a grant refused was never held");
        // The body sent may be written otherwise than the request, around the same id.
        let sent =
            br#"{"id":7,"jsonrpc":"2.0","method":"eth_getBalance","params":["0xab","latest"]}"#;
        assert!(memo.install_forward(0, &asked(FORWARDED), grant(1, sent)));
    }

    #[test]
    fn a_forward_past_the_bounds_is_not_kept() {
        let memo = Memo::new(1 << 20, FORWARDED.len() - 1, AGE, "p-".into());
        assert!(!memo.install_forward(0, &asked(FORWARDED), forward(1)));
        let memo = self::memo();
        let long = "x".repeat(MAX_FIELD_BYTES);
        let referred = Asked { referer: Some(&long), ..asked(FORWARDED) };
        assert!(!memo.install_forward(0, &referred, forward(1)));
        let small =
            Memo::new(4 * forward_size(&asked(FORWARDED), &forward(1)) - 4, 8192, AGE, "p-".into());
        assert!(!small.install_forward(0, &asked(FORWARDED), forward(1)), "a quarter at most");
        assert_eq!(small.stats(), (0, 0));
    }

    #[test]
    fn only_plain_answers_to_one_call_are_handed_over_as_forwards() {
        assert!(answered_plainly(br#"{"jsonrpc":"2.0","id":7,"result":"0x10"}"#, FORWARDED));
        let error = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"x"}}"#;
        assert!(!answered_plainly(error, FORWARDED));
        assert!(!answered_plainly(br#"{"jsonrpc":"2.0","id":8,"result":"0x10"}"#, FORWARDED));
        let batch_of_one = br#"[{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":[]}]"#;
        assert!(!answered_plainly(br#"{"jsonrpc":"2.0","id":7,"result":"0x10"}"#, batch_of_one));
        let notification = br#"{"jsonrpc":"2.0","method":"eth_getBalance","params":[]}"#;
        assert!(!answered_plainly(br#"{"jsonrpc":"2.0","id":null,"result":"0x10"}"#, notification));
    }

    #[test]
    fn a_forward_is_repeated_for_its_age_then_left_to_the_pipeline_and_may_be_handed_over_again() {
        let memo = memo();
        assert!(memo.install_forward(0, &asked(FORWARDED), forward(1)));
        memo.lock().entries.values_mut().for_each(|e| e.handed -= AGE);
        assert!(memo.lookup(&asked(FORWARDED)).is_none());
        assert!(memo.install_forward(0, &asked(FORWARDED), forward(2)));
        assert_eq!(found(&memo, &asked(FORWARDED)).unwrap().0, 2);
        assert_eq!(memo.drain(), (vec![], vec![1]));
        assert_eq!(memo.stats().0, 1);
        bytes_are_the_sum_of_the_entries(&memo);
    }

    #[test]
    fn forward_entries_expire_at_one_second_even_when_max_age_is_larger_and_replays_keep_max_age() {
        let memo = memo();
        assert!(memo.install_forward(0, &asked(FORWARDED), forward(1)));
        assert!(memo.install(2, 0, &asked(CALL), StatusCode::OK, vec![], ANSWER));
        let aged = FORWARD_MAX_AGE - Duration::from_millis(50);
        memo.lock().entries.values_mut().for_each(|e| e.handed -= aged);
        assert_eq!(found(&memo, &asked(FORWARDED)).unwrap().0, 1);
        assert!(!memo.install_forward(0, &asked(FORWARDED), forward(3)), "still fresh");
        memo.lock().entries.values_mut().for_each(|e| e.handed -= Duration::from_millis(50));
        assert!(memo.lookup(&asked(FORWARDED)).is_none(), "a second old: the pipeline's");
        assert!(memo.replay(&asked(CALL)).is_some(), "a replay keeps max_age");
        assert!(memo.install_forward(0, &asked(FORWARDED), forward(4)), "no longer fresh");
        assert_eq!(found(&memo, &asked(FORWARDED)).unwrap().0, 4);
        // A memo whose max_age is shorter repeats forwards for its max_age.
        let short = Memo::new(1 << 20, 8192, Duration::from_millis(300), "p-".into());
        assert!(short.install_forward(0, &asked(FORWARDED), forward(5)));
        short.lock().entries.values_mut().for_each(|e| e.handed -= Duration::from_millis(300));
        assert!(short.lookup(&asked(FORWARDED)).is_none());
    }

    #[test]
    fn a_fresh_forward_is_not_replaced_by_another_for_the_same_request() {
        let memo = memo();
        assert!(memo.install_forward(0, &asked(FORWARDED), forward(1)));
        assert!(!memo.install_forward(0, &asked(FORWARDED), forward(2)));
        let other_id =
            br#"{"jsonrpc":"2.0","id":9,"method":"eth_getBalance","params":["0xab","latest"]}"#;
        let sent_9 = other_id;
        assert!(!memo.install_forward(0, &asked(other_id), grant(3, sent_9)), "the same key");
        assert_eq!(found(&memo, &asked(FORWARDED)).unwrap().0, 1);
        assert_eq!(memo.drain(), (vec![], vec![]));
        assert_eq!(memo.stats().0, 1);
    }

    #[test]
    fn of_forwards_for_one_request_installed_at_once_exactly_one_is_kept() {
        let memo = Arc::new(memo());
        for round in 0..100u64 {
            memo.clear();
            let _ = memo.drain();
            let generation = memo.generation();
            let start = Arc::new(std::sync::Barrier::new(8));
            let installers: Vec<_> = (0..8u64)
                .map(|n| {
                    let (memo, start) = (memo.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        memo.install_forward(generation, &asked(FORWARDED), forward(round * 8 + n))
                    })
                })
                .collect();
            let kept =
                installers.into_iter().map(|i| i.join().unwrap()).filter(|&kept| kept).count();
            assert_eq!(kept, 1, "round {round}");
            assert_eq!(memo.drain(), (vec![], vec![]), "none replaced another");
        }
    }

    #[test]
    fn clearing_forgets_a_forward_and_gives_its_token_back() {
        let memo = memo();
        assert!(memo.install_forward(0, &asked(FORWARDED), forward(4)));
        assert!(memo.install(5, 0, &asked(CALL), StatusCode::OK, vec![], ANSWER));
        memo.clear();
        assert!(memo.lookup(&asked(FORWARDED)).is_none());
        let (counts, mut gone) = memo.drain();
        gone.sort_unstable();
        assert_eq!((counts, gone), (vec![], vec![4, 5]));
        assert_eq!(memo.stats(), (0, 0));
    }

    #[test]
    fn a_forward_decided_before_a_clear_is_not_installed_after_it() {
        let memo = memo();
        let decided_in = memo.generation();
        memo.clear();
        assert!(!memo.install_forward(decided_in, &asked(FORWARDED), forward(1)));
        assert!(memo.lookup(&asked(FORWARDED)).is_none());
        assert_eq!(memo.drain(), (vec![], vec![]));
        assert!(memo.install_forward(memo.generation(), &asked(FORWARDED), forward(2)));
    }

    #[test]
    fn revoking_forgets_a_forward_only_while_it_holds_the_token_revoked() {
        let memo = memo();
        assert!(memo.install_forward(0, &asked(FORWARDED), forward(5)));
        let (_, _, key) = found(&memo, &asked(FORWARDED)).unwrap();
        memo.revoke(&key, 6); // not its token
        assert_eq!(found(&memo, &asked(FORWARDED)).unwrap().0, 5);
        memo.revoke(b"not a key", 5);
        assert_eq!(memo.stats().0, 1);
        memo.revoke(&key, 5);
        assert!(memo.lookup(&asked(FORWARDED)).is_none());
        assert_eq!(memo.stats(), (0, 0));
        assert_eq!(memo.drain(), (vec![], vec![5]));
        // A repeat of the old grant failing late leaves its successor alone.
        assert!(memo.install_forward(0, &asked(FORWARDED), forward(7)));
        memo.revoke(&key, 5);
        assert_eq!(found(&memo, &asked(FORWARDED)).unwrap().0, 7);
        assert_eq!(memo.drain(), (vec![], vec![]));
    }

    #[test]
    fn a_replay_and_a_forward_replacing_each_other_keep_the_bytes_the_size_of_the_one_held() {
        let memo = memo();
        assert!(memo.install(1, 0, &asked(FORWARDED), StatusCode::OK, vec![], ANSWER));
        let replay_bytes = memo.stats().1;
        bytes_are_the_sum_of_the_entries(&memo);
        let grant = forward(2);
        let size = forward_size(&asked(FORWARDED), &grant);
        assert!(memo.install_forward(0, &asked(FORWARDED), grant));
        assert_eq!(memo.stats(), (1, size));
        assert_eq!(memo.drain(), (vec![], vec![1]));
        assert_eq!(found(&memo, &asked(FORWARDED)).unwrap().0, 2);
        // A replay replaces even a fresh forward: the cache's answer is the pipeline's now.
        assert!(memo.install(3, 0, &asked(FORWARDED), StatusCode::OK, vec![], ANSWER));
        assert_eq!(memo.stats(), (1, replay_bytes));
        assert_eq!(memo.drain(), (vec![], vec![2]));
        assert!(matches!(memo.lookup(&asked(FORWARDED)), Some(Found::Replay(_))));
        bytes_are_the_sum_of_the_entries(&memo);
        let key = key_of(&asked(FORWARDED), &scan(FORWARDED).unwrap());
        memo.revoke(&key, 3);
        assert_eq!(memo.stats(), (0, 0));
    }

    #[test]
    fn forwards_are_evicted_past_the_bound_oldest_first_like_replays() {
        let size = forward_size(&asked(FORWARDED), &forward(0)) + 2 * PIECE_OVERHEAD;
        let memo = Memo::new(4 * size, 8192, AGE, "p-".into());
        let body = |n: u64| {
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0x{n:02}","latest"]}}"#
            )
        };
        for token in 0..12u64 {
            let body = body(token);
            let asked = asked(body.as_bytes());
            if token % 3 == 0 {
                let answer = br#"{"id":7,"result":"0x1"}"#;
                assert!(memo.install(token, 0, &asked, StatusCode::OK, vec![], answer));
            } else {
                assert!(memo.install_forward(0, &asked, grant(token, body.as_bytes())));
            }
            bytes_are_the_sum_of_the_entries(&memo);
            assert!(memo.stats().1 <= 4 * size);
        }
        let (entries, _) = memo.stats();
        assert!((2..12).contains(&entries), "{entries}");
        let (_, gone) = memo.drain();
        assert_eq!(gone, (0..(12 - entries as u64)).collect::<Vec<_>>(), "oldest first");
        let newest = body(11);
        assert_eq!(found(&memo, &asked(newest.as_bytes())).unwrap().0, 11);
        let oldest_forward = body(1);
        assert!(memo.lookup(&asked(oldest_forward.as_bytes())).is_none());
    }

    #[test]
    fn revoked_forwards_leave_the_order_bounded_and_every_entry_evictable() {
        let memo = memo();
        for token in 0..1000u64 {
            assert!(memo.install_forward(0, &asked(FORWARDED), forward(token)));
            let (_, _, key) = found(&memo, &asked(FORWARDED)).unwrap();
            memo.revoke(&key, token);
        }
        assert!(memo.install_forward(0, &asked(FORWARDED), forward(1000)));
        let inner = memo.lock();
        assert_eq!(inner.entries.len(), 1);
        assert!(inner.order.len() <= 2 + 16, "{}", inner.order.len());
    }
}
