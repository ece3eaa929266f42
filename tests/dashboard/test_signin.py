"""Arriving and signing in, in a real browser: the API's root leads to the dashboard, which has
an icon; a token is entered by keyboard; a refused or malformed one is told at its field and
nothing is kept; sign-up gives an account and its token once, and answers an address that
already has an account exactly as a new one; every field has a label; signing out forgets; back
from the card payment, the Buy credits page says how it went."""

from __future__ import annotations

import json

import httpx
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import Stack, screenshot, sign_in


def test_the_root_leads_to_the_dashboard_which_has_an_icon(page: Page, stack: Stack) -> None:
    page.goto(f"{stack.api}/")
    assert page.url == f"{stack.api}/dashboard"
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon == "/dashboard/favicon.ico"
    for path in (icon, "/favicon.ico"):
        answer = httpx.get(f"{stack.api}{path}", timeout=10)
        assert (answer.status_code, answer.headers["content-type"]) == (200, "image/x-icon")
    screenshot(page, "sign-in")


def test_a_refused_token_is_told_at_its_field_and_nothing_is_kept(page: Page, stack: Stack) -> None:
    page.goto(f"{stack.api}/dashboard")
    field = page.get_by_label("Management token", exact=True)
    field.fill("not-a-token")  # the page's own check: a management token starts with crm_
    field.press("Enter")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#signin-token-error")).not_to_be_empty()
    field.fill("crm_" + "0" * 40)
    field.press("Enter")
    expect(page.locator("#signin-token-error")).to_contain_text(
        "invalid or revoked management token"
    )
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_be_focused()
    assert page.evaluate("sessionStorage.length") == 0
    expect(page.locator("#nav")).to_be_hidden()


def test_sign_up_gives_a_token_once_and_answers_a_used_address_as_a_new_one(
    page: Page, stack: Stack
) -> None:
    page.goto(f"{stack.api}/dashboard")
    form = page.locator("#signup-form")
    page.get_by_role("button", name="Create account").click()
    expect(form.get_by_label("Name")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#signup-name-error")).not_to_be_empty()
    tokens = []
    for name in ("Sam", "Sam again"):
        form.get_by_label("Name").fill(name)
        form.get_by_label("E-mail").fill("dana@example.com")  # Dana's address, in use
        page.get_by_role("button", name="Create account").click()
        expect(page.locator("#new-secret-value")).to_contain_text("crm_")
        expect(page.locator("#account")).to_contain_text(f"{name} <dana@example.com>")
        expect(page.locator("#account")).to_contain_text("1 credit")
        tokens.append(page.locator("#new-secret-value").inner_text().strip())
        assert "already" not in page.locator("body").inner_text()
        if name == "Sam":
            screenshot(page, "signed-up")
        page.get_by_role("button", name="I have copied it").click()
        page.get_by_role("button", name="Sign out").click()
    accounts = [
        httpx.get(f"{stack.api}/account", headers={"X-Api-Key": t}, timeout=10).json()
        for t in tokens
    ]
    dana = httpx.get(
        f"{stack.api}/account", headers={"X-Api-Key": stack.customer_token}, timeout=10
    ).json()
    assert len({a["customer_id"] for a in [*accounts, dana]}) == 3  # three accounts, none Dana's


def test_every_field_has_a_label_and_signing_out_forgets_the_token(
    page: Page, stack: Stack
) -> None:
    sign_in(page, stack, stack.provider_token)  # the provider's page has the most fields
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
              .filter((field) => field.labels.length === 0).map((field) => field.id)"""
    )
    assert unlabelled == []
    assert json.dumps(page.evaluate("Object.keys(sessionStorage)")) == '["chainrouter.token"]'
    page.get_by_role("button", name="Sign out").click()
    assert page.evaluate("sessionStorage.length") == 0
    expect(page.locator("#view-signin")).to_be_visible()
    expect(page.locator("#view-signin .status")).to_have_text("Signed out.")


def test_back_from_the_card_payment_the_buy_credits_page_says_how_it_went(
    page: Page, stack: Stack
) -> None:
    """Stripe's page sends the customer back to `/dashboard?checkout=...` (docs/billing.md): the
    signed-in tab opens Buy credits (billing.js, loaded beside the bundle), says how the payment
    went, and keeps only the section in the URL. This installation takes no payments itself."""
    sign_in(page, stack, stack.customer_token)
    for outcome, said in (
        ("cancelled", "The card payment was cancelled: nothing was charged."),
        ("success", "Payment received: your credits arrive as soon as the card payment"),
    ):
        page.goto(f"{stack.api}/dashboard?checkout={outcome}")
        expect(page.locator("#view-billing")).to_be_visible()
        expect(page.locator("#view-billing .status")).to_contain_text(said)
        assert page.url == f"{stack.api}/dashboard#billing"
        expect(page.locator("#billing-none")).to_contain_text("takes no payments itself")
        expect(page.locator("#purchases tbody")).to_contain_text("welcome")
        expect(page.locator("#nav [data-view=billing]")).to_have_attribute("aria-current", "page")
    page.reload()  # the section is in the fragment: a reload stays there, with no message
    expect(page.locator("#view-billing")).to_be_visible()
    expect(page.locator("#billing-balance")).not_to_be_empty()
    expect(page.locator("#view-billing .status")).to_have_text("Signed in as Dana.")


def test_a_dialog_is_cancelled_by_escape_and_gives_focus_back(page: Page, stack: Stack) -> None:
    sign_in(page, stack, stack.customer_token)
    page.get_by_role("button", name="API keys").click()
    revoke = page.get_by_role("button", name="Revoke key backend")
    revoke.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("dialog")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog")).to_be_hidden()
    expect(revoke).to_be_focused()
    expect(page.locator("#keys tr", has_text="backend")).to_contain_text("active")
