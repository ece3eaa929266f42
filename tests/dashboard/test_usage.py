"""Usage in the browser (issue 55): a customer answers "what did I spend, on what, where did
calls fail, and how fast were they" from the page alone. Charts have axes with units, the time
zone, hover values that are exact, an empty state; amounts are written for people and in full
on hover; filters by key, chain and period; failed calls with their error; latency by chain."""

from __future__ import annotations

import re
import time

import httpx
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import CHAIN, CHAIN_B, Stack, screenshot, sign_in


def _usage(page: Page, stack: Stack) -> None:
    sign_in(page, stack, stack.customer_token)
    page.get_by_role("button", name="Usage").click()
    expect(page.locator("#usage-summary")).to_contain_text("Spent")


def test_the_usage_page_answers_what_was_spent_on_what_where_calls_failed_and_how_fast(
    page: Page, stack: Stack
) -> None:
    # A call of the key now, and one of a method no plan serves: a failure of today.
    for _ in range(60):
        if stack.rpc(stack.backend_key).status_code == 200:
            break
        time.sleep(0.1)
    assert stack.rpc(stack.backend_key, "eth_getLogs").json()["error"]["code"] == -32002
    _usage(page, stack)
    summary = page.locator("#usage-summary")
    expect(summary).to_contain_text("Failed")
    expect(summary).to_contain_text("Limited")
    # Axes with units and the time zone; the values in a table, exact.
    spend = page.locator("#chart-spend")
    screenshot(page, "usage")
    expect(spend.locator("canvas")).to_have_count(1)
    expect(spend.locator(".u-axis")).to_have_count(2)
    expect(spend.get_by_role("img")).to_have_attribute(
        "aria-label", re.compile(r"^By UTC day, credits\. Spend: [0-9.]+ credits in all")
    )
    page.locator("#usage-form").get_by_label("Break down by").select_option("method")
    page.get_by_role("button", name="Show").click()
    legend = page.locator("#chart-spend .u-legend")
    expect(legend).to_contain_text("eth_blockNumber")
    expect(legend).to_contain_text("eth_getBalance")
    # Hover: the legend shows the exact spend of each method that day, never a float's 3e-7.
    box = spend.locator(".u-over").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    expect(legend).to_contain_text(re.compile(r"0\.0000\d+ credits"))
    assert "e-" not in legend.inner_text()
    expect(page.locator("#failures")).to_contain_text("method not served")
    expect(page.locator("#failures")).to_contain_text("-32002")
    expect(page.locator("#failures")).to_contain_text("every node failed")
    expect(page.locator("#by-chain")).to_contain_text(f"Anvil ({CHAIN})")
    expect(page.locator("#by-scenario")).to_contain_text("served by the first route")
    screenshot(page, "usage-by-method")
    assert "e-" not in page.locator("main").inner_text()


def test_filters_by_key_chain_and_period_and_an_empty_period_says_so(
    page: Page, stack: Stack
) -> None:
    quiet = httpx.post(
        f"{stack.api}/api-keys",
        json={"name": "quiet", "allowed_domains": ["*"], "routing_strategy": "economy"},
        headers={"X-Api-Key": stack.customer_token},
        timeout=10,
    ).json()
    _usage(page, stack)
    calls = page.locator("#usage-summary .card dd").nth(1)  # Spent, Calls, ...
    everything = calls.inner_text()
    page.locator("#usage-form").get_by_label("Chain", exact=True).select_option(str(CHAIN_B))
    page.get_by_role("button", name="Show").click()
    expect(calls).not_to_have_text(everything)
    expect(page.locator("#by-chain")).to_contain_text(f"Anvil B ({CHAIN_B})")
    expect(page.locator("#by-chain")).not_to_contain_text(f"Anvil ({CHAIN})")
    # The last 24 hours, by hour, in the viewer's time zone, named on the axis.
    page.locator("#usage-form").get_by_label("Period").select_option("1")
    page.locator("#usage-form").get_by_label("Chain", exact=True).select_option("")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#chart-calls").get_by_role("img")).to_have_attribute(
        "aria-label", re.compile(r"^By hour \(Europe/Berlin\), calls\.")
    )
    expect(page.locator("#chart-calls .chart-values")).to_contain_text("Hour (Europe/Berlin)")
    # A key without calls: every chart says there is nothing, instead of blank space.
    page.locator("#usage-form").get_by_label("API key").select_option(str(quiet["id"]))
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#chart-spend .chart-empty")).to_have_text(
        "Nothing was spent in this period."
    )
    expect(page.locator("#chart-calls .chart-empty")).to_have_text("No calls in this period.")
    expect(calls).to_contain_text("0 calls")
    expect(page.locator("#failures")).to_contain_text("No call failed in this period.")
    screenshot(page, "usage-empty")


def test_a_keys_usage_opens_from_its_row(page: Page, stack: Stack) -> None:
    sign_in(page, stack, stack.customer_token)
    page.get_by_role("button", name="API keys").click()
    page.get_by_role("button", name="Usage of key backend").click()
    expect(page.locator("#usage-key option:checked")).to_have_text("backend")
    expect(page.locator("#by-key")).to_contain_text("backend")


def test_on_a_phone_the_page_fits_its_width_and_the_charts_are_readable(
    browser: Browser, stack: Stack
) -> None:
    context = browser.new_context(
        viewport={"width": 390, "height": 844},
        device_scale_factor=2,
        is_mobile=True,
        timezone_id="Europe/Berlin",
        locale="en-GB",
    )
    page = context.new_page()
    try:
        _usage(page, stack)
        expect(page.locator("#chart-spend canvas")).to_have_count(1)
        wide = page.evaluate(
            """() => [...document.querySelectorAll('main *')]
                  .filter((e) => e.getBoundingClientRect().right > 391 && e.offsetParent)
                  .map((e) => e.tagName + '#' + e.id + '.' + e.className).slice(0, 8)"""
        )
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, wide  # no sideways scrolling of the page
        for chart in ("#chart-spend", "#chart-calls", "#chart-rates"):
            box = page.locator(f"{chart} .uplot").bounding_box()
            assert box is not None
            assert box["x"] >= 0
            assert box["x"] + box["width"] <= 390
        screenshot(page, "usage-phone", full_page=False)
        page.locator("#chart-calls").scroll_into_view_if_needed()
        screenshot(page, "usage-phone-charts", full_page=False)
    finally:
        context.close()
