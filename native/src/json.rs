//! Reading JSON-RPC bodies without making values of them: where each call's id, method and
//! parameters are, so that the server can key the decisions it applies (memo.rs), send each
//! call as the client wrote it, and put the caller's ids back into answers.
//!
//! The reader is strict: it checks every byte (UTF-8, escapes, the grammar, how deep the
//! parameters nest), and refuses what the pipeline's parser might read otherwise than as
//! written (an id not echoed byte for byte, a member name with an escape, a member twice, a
//! number with an exponent, an escaped surrogate). A body it refuses goes to the pipeline, which
//! decides; so the reader never has to agree with the pipeline on a body the pipeline refuses,
//! only on those it serves (`tests/router/test_fast_reading.py` checks that on generated bodies).

/// A byte range of the body: `start..end`.
pub type Span = (usize, usize);

/// The deepest nesting followed anywhere; the pipeline bounds `params` lower (`max_params_depth`).
const MAX_DEPTH: usize = 128;
const MAX_ID_BYTES: usize = 64;

/// One call of a body, as spans of it.
#[derive(Debug, PartialEq, Eq)]
pub struct Call {
    /// The call's object, braces included.
    pub object: Span,
    /// The value of its `id` member: a plain id (`plain_id`).
    pub id: Span,
    /// The text of its `method`, without the quotes, when it is a string without escapes.
    pub method: Option<Span>,
    /// The items of its `params` when that is an array, each a span.
    pub elements: Option<Vec<Span>>,
}

/// A body read: one call, or a batch of them.
#[derive(Debug, PartialEq, Eq)]
pub struct Calls {
    pub batch: bool,
    pub calls: Vec<Call>,
}

/// The calls of `body`, or None for anything the reader refuses: not JSON, not an object or a
/// non-empty array of objects, a call without a plain id (a notification included) or with
/// `params` nested deeper than `max_params_depth` (`params` itself is level 1).
pub fn read_calls(body: &[u8], max_params_depth: usize) -> Option<Calls> {
    let mut scanner = Scanner { text: body, at: 0 };
    scanner.space();
    let batch = match scanner.peek()? {
        b'{' => false,
        b'[' => true,
        _ => return None,
    };
    let mut calls = Vec::new();
    if batch {
        let items = scanner.array(|scanner| {
            calls.push(scanner.call(max_params_depth)?);
            Some(())
        })?;
        if items == 0 {
            return None; // an empty batch is an error the pipeline answers
        }
    } else {
        calls.push(scanner.call(max_params_depth)?);
    }
    scanner.space();
    (scanner.at == body.len()).then_some(Calls { batch, calls })
}

/// The answers of a batch answer: for each object of the array, the span of its `id` (a plain
/// id) and of the object itself. None for anything else: not an array of objects each with one
/// plain id, or not JSON (each answer is then the pipeline's to ask again on its own).
pub fn read_answers(body: &[u8]) -> Option<Vec<(Span, Span)>> {
    let mut scanner = Scanner { text: body, at: 0 };
    scanner.space();
    if scanner.peek()? != b'[' {
        return None;
    }
    let mut answers = Vec::new();
    scanner.array(|scanner| {
        if scanner.peek()? != b'{' {
            return None;
        }
        let text = scanner.text;
        let start = scanner.at;
        let mut id = None;
        scanner.object(|scanner, (name_start, name_end)| {
            let name = &text[name_start + 1..name_end - 1];
            let value_start = scanner.at;
            scanner.value(1)?;
            if name.contains(&b'\\') {
                return None;
            }
            if name == b"id" {
                if id.is_some() || !plain_id(&text[value_start..scanner.at]) {
                    return None;
                }
                id = Some((value_start, scanner.at));
            }
            Some(())
        })?;
        answers.push((id?, (start, scanner.at)));
        Some(())
    })?;
    scanner.space();
    (scanner.at == body.len()).then_some(answers)
}

/// The span of the `result` of `answer` when it is a node's plain answer to the call sent under
/// the id `id` (its bytes as sent): one object whose members are exactly `"jsonrpc":"2.0"`, that
/// id and a `result`, each once, valid JSON throughout. This recognizes the plainest of the
/// answers the pipeline's judge serves as given (router/answers.py, `served_as_given`; a
/// property test holds the two together), so that such an answer needs no judging in Python;
/// anything else (an error, another id, another member) is the judge's to read.
pub fn plain_result(answer: &[u8], id: &[u8]) -> Option<Span> {
    let mut scanner = Scanner { text: answer, at: 0 };
    scanner.space();
    if scanner.peek()? != b'{' {
        return None;
    }
    let (mut version, mut echoed, mut result) = (false, false, None);
    scanner.object(|scanner, (name_start, name_end)| {
        let start = scanner.at;
        scanner.value(1)?;
        let value = &answer[start..scanner.at];
        match &answer[name_start..name_end] {
            b"\"jsonrpc\"" if value == b"\"2.0\"" && !version => version = true,
            b"\"id\"" if value == id && !echoed => echoed = true,
            b"\"result\"" if result.is_none() => result = Some((start, scanner.at)),
            _ => return None, // another member, another value, or a member twice
        }
        Some(())
    })?;
    scanner.space();
    (scanner.at == answer.len() && version && echoed).then_some(result?)
}

/// The number a plain result holds when it is a JSON string of `0x` and 1 to 16 hex digits (an
/// `eth_blockNumber`'s head), read as router/belief.py's `head_told` reads it (a property test
/// holds the two together); None otherwise.
pub fn result_quantity(result: &[u8]) -> Option<u64> {
    let digits = result.strip_prefix(b"\"0x")?.strip_suffix(b"\"")?;
    if digits.is_empty() || digits.len() > 16 || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

pub(crate) struct Scanner<'a> {
    text: &'a [u8],
    at: usize,
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

    /// One call: an object whose `id`, `method`, `params` and `jsonrpc` members each come at
    /// most once (the id exactly once, plain), and whose member names have no escapes (the
    /// pipeline's parser reads `"\u0069d"` as `id`).
    fn call(&mut self, max_params_depth: usize) -> Option<Call> {
        if self.peek()? != b'{' {
            return None;
        }
        let text = self.text;
        let start = self.at;
        let (mut id, mut method, mut params, mut version) = (None, None, None, false);
        self.object(|scanner, (name_start, name_end)| {
            let name = &text[name_start + 1..name_end - 1];
            if name.contains(&b'\\') {
                return None;
            }
            let value_start = scanner.at;
            let depth = scanner.value(1)?;
            let value = (value_start, scanner.at);
            match name {
                b"id" if id.is_none() && plain_id(&text[value.0..value.1]) => id = Some(value),
                b"method" if method.is_none() => method = Some(value),
                b"params" if params.is_none() => {
                    if depth > max_params_depth {
                        return None;
                    }
                    params = Some(value);
                }
                b"jsonrpc" if !version => version = true,
                b"id" | b"method" | b"params" | b"jsonrpc" => return None, // twice, or an id
                _ => {}
            }
            Some(())
        })?;
        let object = (start, self.at);
        let method = method.and_then(|(s, e)| {
            let inner = &text[s..e];
            (inner.len() >= 2 && inner[0] == b'"' && !inner.contains(&b'\\'))
                .then(|| (s + 1, e - 1))
        });
        let elements = match params {
            Some((s, _)) if text[s] == b'[' => Some(elements_of(text, s)?),
            _ => None,
        };
        Some(Call { object, id: id?, method, elements })
    }

    /// An object, from its `{`: each member's name (a span with the quotes) to `member`, which
    /// reads the value itself and refuses the object by giving None.
    fn object(&mut self, mut member: impl FnMut(&mut Self, Span) -> Option<()>) -> Option<()> {
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
            member(self, name)?;
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

    /// A value at nesting level `depth` (1: a member of a call); the deepest level of arrays
    /// and objects it holds, itself included (`depth - 1` for a string, a number, a literal).
    fn value(&mut self, depth: usize) -> Option<usize> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut deepest = depth;
        match self.peek()? {
            b'"' => return self.string().map(|_| depth - 1),
            b'{' => self.object(|scanner, _| {
                deepest = deepest.max(scanner.value(depth + 1)?);
                Some(())
            })?,
            b'[' => {
                self.array(|scanner| {
                    deepest = deepest.max(scanner.value(depth + 1)?);
                    Some(())
                })?;
            }
            b't' => return self.literal(b"true").map(|_| depth - 1),
            b'f' => return self.literal(b"false").map(|_| depth - 1),
            b'n' => return self.literal(b"null").map(|_| depth - 1),
            b'-' | b'0'..=b'9' => return self.number().map(|_| depth - 1),
            _ => return None,
        }
        Some(deepest)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.text.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// JSON's number grammar, without an exponent (Ethereum's JSON never has one, and `1e999`
    /// is a number one parser reads and another refuses).
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
            return None;
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

    /// A string, its span with the quotes. Escapes are checked, and an escaped surrogate is
    /// refused (a lone one is an error to one parser and a character to another); raw control
    /// bytes are refused; UTF-8 is checked.
    fn string(&mut self) -> Option<Span> {
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
                        // Digits checked first: `from_str_radix` would take a leading `+`.
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        let unit = u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
                        if (0xd800..=0xdfff).contains(&unit) {
                            return None;
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

/// The spans of the items of the (already checked) array starting at `start`.
fn elements_of(text: &[u8], start: usize) -> Option<Vec<Span>> {
    let mut scanner = Scanner { text, at: start };
    let mut spans = Vec::new();
    scanner.array(|scanner| {
        let from = scanner.at;
        scanner.value(2)?;
        spans.push((from, scanner.at));
        Some(())
    })?;
    Some(spans)
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

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: &[u8] =
        br#"{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab","latest"]}"#;

    fn text(body: &[u8], span: Span) -> &[u8] {
        &body[span.0..span.1]
    }

    #[test]
    fn a_call_is_read_into_its_id_method_and_parameters() {
        let read = read_calls(CALL, 64).unwrap();
        assert!(!read.batch);
        let call = &read.calls[0];
        assert_eq!(call.object, (0, CALL.len()));
        assert_eq!(text(CALL, call.id), b"7");
        assert_eq!(text(CALL, call.method.unwrap()), b"eth_getBalance");
        let elements: Vec<&[u8]> =
            call.elements.as_ref().unwrap().iter().map(|&s| text(CALL, s)).collect();
        assert_eq!(elements, vec![&b"\"0xab\""[..], &b"\"latest\""[..]]);
    }

    #[test]
    fn each_call_of_a_batch_is_read() {
        let batch =
            br#" [ {"id":"a","method":"m","params":{"x":[1]}} , {"method":"n","id":null} ] "#;
        let read = read_calls(batch, 64).unwrap();
        assert!(read.batch);
        let ids: Vec<&[u8]> = read.calls.iter().map(|c| text(batch, c.id)).collect();
        assert_eq!(ids, vec![&b"\"a\""[..], &b"null"[..]]);
        assert_eq!(read.calls[0].elements, None, "named params are not an array");
        assert_eq!(text(batch, read.calls[1].object), br#"{"method":"n","id":null}"#);
    }

    #[test]
    fn an_id_inside_params_is_not_the_calls_id() {
        let body = br#"{"params":[{"id":1}],"id":2}"#;
        let read = read_calls(body, 64).unwrap();
        assert_eq!(text(body, read.calls[0].id), b"2");
    }

    #[test]
    fn ids_echoed_other_than_as_sent_are_refused() {
        for id in ["1.0", "-0", "01", "1e3", r#""\u0041""#, "[1]", "1234567890123456789", "true"] {
            let body = format!(r#"{{"id":{id},"method":"m"}}"#);
            assert_eq!(read_calls(body.as_bytes(), 64), None, "{id}");
        }
        assert_eq!(read_calls(br#"{"id":1,"id":2}"#, 64), None); // twice
        assert_eq!(read_calls(br#"{"id":1,"\u0069d":2}"#, 64), None); // a name with an escape
        assert_eq!(read_calls(br#"{"method":"m"}"#, 64), None); // a notification
    }

    #[test]
    fn a_member_the_pipeline_reads_given_twice_is_refused() {
        for body in [
            &br#"{"id":1,"method":"a","method":"b"}"#[..],
            br#"{"id":1,"params":[],"params":[1]}"#,
            br#"{"id":1,"jsonrpc":"2.0","jsonrpc":"2.0"}"#,
        ] {
            assert_eq!(read_calls(body, 64), None, "{}", String::from_utf8_lossy(body));
        }
        // Another member is the pipeline's to refuse: the reader only says where things are.
        assert!(read_calls(br#"{"id":1,"method":"a","extra":1}"#, 64).is_some());
    }

    #[test]
    fn a_method_with_an_escape_has_no_plain_text() {
        let body = br#"{"id":1,"method":"eth_\u0063all"}"#;
        assert_eq!(read_calls(body, 64).unwrap().calls[0].method, None);
        let body = br#"{"id":1,"method":7}"#;
        assert_eq!(read_calls(body, 64).unwrap().calls[0].method, None);
    }

    #[test]
    fn params_deeper_than_the_bound_are_refused() {
        let nested = |levels: usize| {
            format!(
                r#"{{"id":1,"method":"m","params":{}{}}}"#,
                "[".repeat(levels),
                "]".repeat(levels)
            )
        };
        assert!(read_calls(nested(64).as_bytes(), 64).is_some());
        assert_eq!(read_calls(nested(65).as_bytes(), 64), None);
        assert_eq!(read_calls(nested(500).as_bytes(), 1000), None, "past the reader's own bound");
    }

    #[test]
    fn the_answers_of_a_batch_are_found_by_their_ids() {
        let body = br#"[{"jsonrpc":"2.0","id":"b","result":"0x1"}, {"id":1,"error":{"code":3}}]"#;
        let answers = read_answers(body).unwrap();
        let found: Vec<(&[u8], &[u8])> =
            answers.iter().map(|&(id, object)| (text(body, id), text(body, object))).collect();
        assert_eq!(
            found,
            vec![
                (&b"\"b\""[..], &br#"{"jsonrpc":"2.0","id":"b","result":"0x1"}"#[..]),
                (&b"1"[..], &br#"{"id":1,"error":{"code":3}}"#[..]),
            ]
        );
        for refused in [
            &br#"{"id":1,"result":"0x1"}"#[..],
            br#"[{"result":"0x1"}]"#,
            br#"[{"id":1.5,"result":"0x1"}]"#,
            br#"[{"id":1,"id":2}]"#,
            br#"[1]"#,
            br#"[{"id":1}"#,
        ] {
            assert_eq!(read_answers(refused), None, "{}", String::from_utf8_lossy(refused));
        }
    }

    #[test]
    fn a_plain_answer_is_the_sent_id_and_a_result_and_nothing_else() {
        let plain = br#"{"jsonrpc":"2.0","id":7,"result":{"a":[1,"x"]}}"#;
        assert_eq!(
            plain_result(plain, b"7").map(|s| text(plain, s)),
            Some(&br#"{"a":[1,"x"]}"#[..])
        );
        let reordered = br#" {"result":"0x1", "id":"q", "jsonrpc":"2.0"} "#;
        assert_eq!(
            plain_result(reordered, br#""q""#).map(|s| text(reordered, s)),
            Some(&b"\"0x1\""[..])
        );
        for (answer, id) in [
            (&br#"{"jsonrpc":"2.0","id":8,"result":"0x1"}"#[..], &b"7"[..]), // another id
            (br#"{"jsonrpc":"2.0","id":"7","result":"0x1"}"#, b"7"),
            (br#"{"jsonrpc":"2.0","id":7,"error":{"code":3}}"#, b"7"),
            (br#"{"jsonrpc":"2.0","id":7,"result":"0x1","error":null}"#, b"7"),
            (br#"{"jsonrpc":"2.0","id":7,"result":1,"result":2}"#, b"7"),
            (br#"{"jsonrpc":"1.0","id":7,"result":"0x1"}"#, b"7"),
            (br#"{"id":7,"result":"0x1"}"#, b"7"),
            (br#"{"jsonrpc":"2.0","id":7}"#, b"7"),
            (br#"{"jsonrpc":"2.0","id":7,"result":1e3}"#, b"7"),
            (br#"{"jsonrpc":"2.0","id":7,"result":"0x1"} x"#, b"7"),
            (br#"[{"jsonrpc":"2.0","id":7,"result":"0x1"}]"#, b"7"),
        ] {
            assert_eq!(plain_result(answer, id), None, "{}", String::from_utf8_lossy(answer));
        }
    }

    #[test]
    fn what_is_not_json_or_is_read_two_ways_is_refused() {
        for body in [
            &br#"{"id":1,"method":"m""#[..],
            br#"{"id":1,"method":"m\x"}"#,
            b"{\"id\":1,\"method\":\"m\x01\"}",
            br#"{"id":1,"params":[1,]}"#,
            br#"{"id":1} x"#,
            b"{\"id\":1,\"m\":\"\xff\"}",
            br#"{"id":1,"params":[1e3]}"#,
            br#"{"id":1,"params":["\ud800"]}"#,
            br#"{"id":1,"params":["\uDFFF"]}"#,
            br#"[]"#,
            br#"{}"#,
            br#"7"#,
        ] {
            assert_eq!(read_calls(body, 64), None, "{}", String::from_utf8_lossy(body));
        }
    }
}
