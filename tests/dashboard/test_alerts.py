"""Alerts in the browser: a customer sets a low-balance alert on the overview and a daily spend
alert on a key; while one holds, every page says so at its top."""

from __future__ import annotations

import time

from playwright.sync_api import Page, expect

from tests.dashboard.conftest import Stack, screenshot, sign_in


def test_a_low_balance_alert_set_on_the_overview_shows_on_every_page(
    page: Page, stack: Stack
) -> None:
    sign_in(page, stack, stack.customer_token)
    expect(page.locator("#alerts")).to_be_hidden()
    field = page.get_by_label("Warn me when the balance is below")
    expect(field).to_have_value("0")
    field.fill("-2")
    page.get_by_role("button", name="Save alert").click()
    expect(field).to_have_attribute("aria-invalid", "true")
    field.fill("10")
    page.get_by_role("button", name="Save alert").click()
    alerts = page.locator("#alerts")
    expect(alerts).to_contain_text("Alert: the balance, 4.9")
    expect(alerts).to_contain_text("credits, is below 10.")
    screenshot(page, "alert")
    for section in ("API keys", "Usage", "Buy credits", "Management tokens"):
        page.get_by_role("button", name=section, exact=True).click()
        expect(alerts).to_be_visible()
    page.get_by_role("button", name="Overview").click()
    field.fill("0")
    page.get_by_role("button", name="Save alert").click()
    expect(alerts).to_be_hidden()


def test_a_key_spending_more_than_its_daily_alert_is_told(page: Page, stack: Stack) -> None:
    for _ in range(60):  # calls of today: 0.0001 credits each
        if stack.rpc(stack.backend_key).status_code == 200:
            break
        time.sleep(0.1)
    for _ in range(3):
        assert stack.rpc(stack.backend_key).status_code == 200
    sign_in(page, stack, stack.customer_token)
    page.get_by_role("button", name="API keys").click()
    page.get_by_role("button", name="Edit key backend").click()
    page.locator("#key-form").get_by_label("Spend alert").fill("0.0002")
    page.get_by_role("button", name="Save changes").click()
    row = page.locator("#keys tr", has_text="backend")
    expect(row).to_contain_text("alert above 0.0002 credits")
    told = "spent 0.0004 credits"
    for _ in range(50):  # usage is flushed every second here: until all four calls are in it
        page.get_by_role("button", name="Overview").click()
        alerts = page.locator("#alerts")
        if alerts.is_visible() and told in (alerts.text_content() or ""):
            break
        page.wait_for_timeout(200)
    expect(page.locator("#alerts")).to_contain_text(
        "Alert: key backend spent 0.0004 credits today (UTC), more than its alert of 0.0002."
    )
