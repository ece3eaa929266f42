// Alerts the customer set (a low balance, a key's daily spend) that hold now: on every page.
import { $, element } from "../dom.js";

export function showAlerts(alerts) {
  const box = $("#alerts");
  box.replaceChildren(
    ...(alerts || []).map((alert) => element("p", `Alert: ${alert.message}.`, { class: `alert ${alert.kind}` })),
  );
  box.hidden = !(alerts && alerts.length);
}
