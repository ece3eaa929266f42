// Talking to the management API: the token travels only in the X-Api-Key header of requests to
// this origin, never in a URL, a cookie or a submitted form.

export const session = { token: sessionStorage.getItem("chainrouter.token") };

export class ApiError extends Error {
  constructor(status, message, details = []) {
    super(message);
    this.status = status;
    this.details = details; // [{field, message}] from the API's error body
  }
}

// JSON with its decimals kept exact: a number written with a fraction or an exponent (credits,
// prices, milliseconds), or an integer past 2^53, is returned as its text ("0.0000003"), never
// as a binary float that would print as 3e-7. Plain safe integers (ids, counts) stay numbers.
export function parseExactJson(text) {
  const out = [];
  let start = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      // a string: skip to its closing quote, over escapes
      i += 1;
      while (i < n && text.charCodeAt(i) !== 34) i += text.charCodeAt(i) === 92 ? 2 : 1;
      i += 1;
    } else if (c === 45 || (c >= 48 && c <= 57)) {
      let j = i + 1;
      while (j < n && /[-+.eE0-9]/.test(text[j])) j += 1;
      const token = text.slice(i, j);
      if (/[.eE]/.test(token) || !Number.isSafeInteger(Number(token))) {
        out.push(text.slice(start, i), `"${token}"`);
        start = j;
      }
      i = j;
    } else {
      i += 1;
    }
  }
  out.push(text.slice(start));
  return JSON.parse(out.join(""));
}

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (session.token) headers["X-Api-Key"] = session.token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = parseExactJson(text);
    } catch {
      throw new ApiError(response.status, `the server answered HTTP ${response.status}`);
    }
  }
  if (!response.ok) {
    const error = data && data.error;
    throw new ApiError(
      response.status,
      error ? error.message : `HTTP ${response.status}`,
      (error && error.details) || [],
    );
  }
  return data;
}
