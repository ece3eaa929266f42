// Amounts, counts and times for people. Credits arrive as exact decimal text (api.js) and are
// rounded here as text, digit by digit: never through a binary float.

const groups = new Intl.NumberFormat("en");

function parts(text) {
  const value = String(text).trim();
  const negative = value.startsWith("-");
  const [whole, fraction = ""] = value.replace(/^[-+]/, "").split(".");
  return { negative, whole: whole.replace(/^0+(?=\d)/, "") || "0", fraction };
}

// Round a decimal text half up to `places` decimals; trailing zeros dropped.
export function roundDecimal(text, places) {
  const { negative, whole, fraction } = parts(text);
  const padded = (fraction + "0".repeat(places + 1)).slice(0, places + 1);
  let digits = whole + padded.slice(0, places);
  if (Number(padded[places]) >= 5) {
    const out = digits.split("");
    let k = out.length - 1;
    while (k >= 0) {
      if (out[k] === "9") {
        out[k] = "0";
        k -= 1;
      } else {
        out[k] = String(Number(out[k]) + 1);
        break;
      }
    }
    digits = (k < 0 ? "1" : "") + out.join("");
  }
  const cut = digits.length - places;
  const intPart = digits.slice(0, cut).replace(/^0+(?=\d)/, "") || "0";
  const fracPart = digits.slice(cut).replace(/0+$/, "");
  const zero = /^0*$/.test(intPart + fracPart);
  return `${negative && !zero ? "-" : ""}${intPart}${fracPart ? `.${fracPart}` : ""}`;
}

// The exact text, without trailing zeros: "5.000000000" -> "5".
export function exact(text) {
  const { negative, whole, fraction } = parts(text);
  const f = fraction.replace(/0+$/, "");
  return `${negative && (whole !== "0" || f) ? "-" : ""}${whole}${f ? `.${f}` : ""}`;
}

function grouped(text) {
  const negative = text.startsWith("-");
  const [whole, fraction] = text.replace(/^-/, "").split(".");
  const withCommas = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${negative ? "-" : ""}${withCommas}${fraction ? `.${fraction}` : ""}`;
}

// An amount for people: 2 decimals from 1 up, 2 significant digits below; "≈" when rounded.
export function amount(text) {
  const full = exact(text);
  const { whole, fraction } = parts(full);
  let places = 2;
  if (whole === "0") {
    const first = fraction.search(/[1-9]/);
    places = first < 0 ? 0 : first + 2;
  }
  const shown = roundDecimal(full, places);
  return `${shown === full ? "" : "≈"}${grouped(shown)}`;
}

export function creditsUnit(text) {
  return exact(text) === "1" ? "credit" : "credits";
}

// "0.0000003 credits", with the exact value kept for the title (shown on hover).
export function credits(text) {
  return `${amount(text)} ${creditsUnit(text)}`;
}

export function creditsFull(text) {
  return `${exact(text)} ${creditsUnit(text)}`;
}

export function count(n, singular, plural = `${singular}s`) {
  const value = Number(n);
  return `${groups.format(value)} ${value === 1 ? singular : plural}`;
}

export const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";

export function when(iso) {
  if (!iso) return "";
  return new Date(iso).toLocaleString(undefined, {
    dateStyle: "medium",
    timeStyle: "short",
  });
}

export function hour(iso) {
  return new Date(iso).toLocaleString(undefined, {
    month: "short",
    day: "numeric",
    hour: "2-digit",
    minute: "2-digit",
  });
}

export function utcDay(iso) {
  return new Date(iso).toLocaleDateString(undefined, { timeZone: "UTC", dateStyle: "medium" });
}

export function percent(part, whole) {
  if (!whole) return "–";
  const value = (Number(part) * 100) / Number(whole);
  return `${value >= 10 || value === 0 ? value.toFixed(0) : value.toFixed(1)}%`;
}

export function ms(text) {
  if (text === null || text === undefined) return "–";
  const value = Number(text);
  return `${value >= 100 ? value.toFixed(0) : value.toFixed(1)} ms`;
}

// Routing outcomes as people read them; the stored name stays in the title.
export const SCENARIOS = {
  first_choice: "served by the first route",
  failover: "served after a failover",
  hedged: "served by a hedged attempt",
  split: "served in parts (log range)",
  cache: "served from the cache",
  verification: "asked to prove an answer",
  subscription: "WebSocket notification",
  subscription_held: "WebSocket subscription held",
  no_route: "no node in sync",
  all_failed: "every node failed",
  rate_limited: "nodes rate limited",
  insufficient_credits: "not enough credits",
  unsupported_method: "method not served",
  refused: "refused by a router rule",
  rejected: "invalid request",
  incapable: "no node able to answer",
};

export function scenario(name) {
  return SCENARIOS[name] || name;
}

// Exact sums of credits: as BigInt nano-credits (amounts have at most 9 decimals).
export function toNano(text) {
  const { negative, whole, fraction } = parts(exact(String(text)));
  const nano = BigInt(whole) * 1000000000n + BigInt((fraction + "000000000").slice(0, 9));
  return negative ? -nano : nano;
}

export function fromNano(nano) {
  const negative = nano < 0n;
  const digits = (negative ? -nano : nano).toString().padStart(10, "0");
  return exact(`${negative ? "-" : ""}${digits.slice(0, -9)}.${digits.slice(-9)}`);
}

export function sumExact(values) {
  return fromNano(values.reduce((total, v) => total + toNano(v ?? "0"), 0n));
}
