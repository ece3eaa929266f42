// A secret shown once: copied, then removed from the page.
import { $, copy, element } from "./dom.js";

export function showSecret(title, secret, urls = []) {
  $("#new-secret-title").textContent = title;
  $("#new-secret-value").textContent = secret;
  $("#new-secret-urls").replaceChildren(
    ...urls.map(([label, url]) => {
      const line = element("p");
      line.append(element("span", `${label}: `), element("code", url));
      return line;
    }),
  );
  $("#new-secret").hidden = false;
  $("#new-secret-copy").focus();
}

export function hideSecret() {
  $("#new-secret-value").textContent = "";
  $("#new-secret-urls").replaceChildren();
  $("#new-secret").hidden = true;
}

$("#new-secret-copy").addEventListener("click", () => copy($("#new-secret-value").textContent));
$("#new-secret-done").addEventListener("click", hideSecret);
