"""The HTML report in a real browser: Debian's headless Chromium, driven by playwright, opens the page from disk.
Skipped where /usr/bin/chromium is absent, unless BENCHBUILD_REQUIRE_BROWSER=1 (set by `.ci/run`) makes that a
failure; deselect with `-m "not browser"`."""

import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.shared]

CHROMIUM = Path("/usr/bin/chromium")
ARGUMENTS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    reason = None
    if not CHROMIUM.is_file():
        reason = f"{CHROMIUM} is absent (install Debian's chromium package)"
    else:
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            reason = "playwright is not installed (the `test` extra)"
    if reason is not None:
        if os.environ.get("BENCHBUILD_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + " and BENCHBUILD_REQUIRE_BROWSER=1")
        pytest.skip(reason)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGUMENTS)
        yield chromium
        chromium.close()


@pytest.fixture
def opened(browser, full_report):
    """The report page loaded from disk, with every console message, page error and request it made."""
    page_file = next(path for path in full_report.files if path.suffix == ".html")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    seen = {"console": [], "errors": [], "requests": []}
    page.on("console", lambda message: seen["console"].append((message.type, message.text)))
    page.on("pageerror", lambda error: seen["errors"].append(str(error)))
    page.on("request", lambda request: seen["requests"].append(request.url))
    page.goto(page_file.resolve().as_uri())
    page.wait_for_load_state("load")
    yield page, seen
    page.close()


def column_texts(page, table_selector: str, column: int) -> list[str]:
    return page.eval_on_selector_all(f"{table_selector} tbody tr",
                                     f"rows => rows.map(row => row.cells[{column}].textContent.trim())")


def test_the_page_loads_from_disk_without_errors_or_network_requests(opened):
    page, seen = opened
    assert seen["errors"] == []
    assert [message for message in seen["console"] if message[0] in ("error", "warning")] == []
    assert seen["requests"], "the page should at least load itself"
    assert [url for url in seen["requests"] if not url.startswith(("file://", "data:"))] == []
    images = page.eval_on_selector_all("img", "images => images.map(image => image.naturalWidth)")
    assert images and all(width > 0 for width in images)  # every figure was found and decoded


def test_every_leaderboard_row_is_in_the_rendered_dom(opened, full_report):
    page, _ = opened
    boards = page.eval_on_selector_all("table.leaderboard", "tables => tables.map(t => t.dataset.benchmark + ' ' + "
                                       "t.dataset.split + ' ' + t.tBodies[0].rows.length)")
    expected = {}
    for row in full_report.rows:
        expected.setdefault(f"{row.benchmark} {row.split}", set()).add(row.model)
    assert sorted(boards) == sorted(f"{key} {len(models)}" for key, models in expected.items())
    assert sorted(column_texts(page, "table.leaderboard[data-benchmark='scan/tiny']", 0)) == \
        ["tiny_sag_t5", "tiny_transformer"]


def test_clicking_a_column_header_sorts_the_rows_by_it_and_again_reverses_them(opened):
    page, _ = opened
    table = "table.leaderboard[data-benchmark='scan/tiny']"
    runs_header = page.locator(f"{table} thead th", has_text="runs")
    runs_header.click()
    assert column_texts(page, table, 1) == ["1", "2"]
    assert column_texts(page, table, 0) == ["tiny_sag_t5", "tiny_transformer"]
    assert runs_header.get_attribute("aria-sort") == "ascending"
    runs_header.click()
    assert column_texts(page, table, 1) == ["2", "1"]
    assert column_texts(page, table, 0) == ["tiny_transformer", "tiny_sag_t5"]
    assert runs_header.get_attribute("aria-sort") == "descending"


def test_numbers_sort_as_numbers_and_rows_without_a_value_stay_last(opened):
    page, _ = opened
    table = "table.runs"
    seed = page.locator(f"{table} thead th", has_text="seed")
    seed.click()
    seeds = column_texts(page, table, 3)
    assert seeds == sorted(seeds, key=int)
    time_header = page.locator(f"{table} thead th", has_text="training time")
    time_header.click()
    time_header.click()
    seconds = page.eval_on_selector_all(f"{table} tbody tr", "rows => rows.map(r => Number(r.cells[7].dataset.sort))")
    assert seconds == sorted(seconds, reverse=True)


def test_a_screenshot_of_the_page_is_written(opened, tmp_path):
    from matplotlib.image import imread

    page, _ = opened
    path = tmp_path / "report.png"
    page.screenshot(path=str(path), full_page=True)
    pixels = imread(path)
    assert pixels.shape[0] > 900 and pixels[..., :3].std() > 0.05


def test_the_leaderboards_show_confidence_intervals_and_the_page_the_per_seed_figure(opened, full_report):
    from benchbuild.evaluation.uncertainty import SeedStatistics

    page, _ = opened
    table = "table.leaderboard[data-benchmark='scan/tiny']"
    shown = page.eval_on_selector_all(f"{table} tbody tr", "rows => rows.map(row => [row.cells[0].textContent.trim(), "
                                      "Array.from(row.querySelectorAll('small.ci'), ci => ci.textContent)])")
    rows = {(row.model, row.metric): row for row in full_report.rows if row.benchmark == "scan/tiny"}
    for model, intervals in shown:
        assert len(intervals) == len({metric for m, metric in rows if m == model}), (model, intervals)
        # Two seeds: the t-interval over seeds; one seed: the run's bootstrap over its test rows.
        row = rows[(model, "exact_match")]
        low, high = SeedStatistics.of(row.values).mean_interval or row.example_intervals[0]
        assert intervals[0] == f"95% CI [{low:.2f}, {high:.2f}]"
    assert {model for model, _ in shown} == {"tiny_transformer", "tiny_sag_t5"}
    spread = page.locator("figure", has=page.locator("img[alt='per-seed results']"))
    assert spread.count() == 1 and "95% t-interval over seeds" in spread.inner_text()
    assert page.eval_on_selector("img[alt='per-seed results']", "image => image.naturalWidth") > 0
