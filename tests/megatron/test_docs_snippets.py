"""The documentation's blocks marked ``<!-- docs: megatron -->`` (docs/snippets.md), run here.

The main tier collects every page through the root conftest.py and reports these blocks as
skipped, naming this tier; here, with megatron-core importable, they run as written, each in
its page's working copy, after the page's file blocks (``# file: PATH``) are written.
"""

import sys

import pytest

snippets = sys.modules["megaplug_docs_snippets"]  # loaded by the repository's conftest.py


def _documents():
    """Every covered page that has a block marked ``megatron``, with the examples to run."""
    found = []
    for page in snippets.pages():
        document = snippets.DOCS.parse(page)
        examples = [example for example in document.examples()
                    if "megatron" in example.parsed.markers or example.parsed.file_path]
        if any("megatron" in example.parsed.markers for example in examples):
            found.append((page, document, examples))
    return found


DOCUMENTS = _documents()
BLOCKS = [(document, example) for _, document, examples in DOCUMENTS for example in examples]


@pytest.fixture(scope="module", autouse=True)
def page_workspaces():
    for _, document, _ in DOCUMENTS:
        snippets._setup_page(document.namespace)
    yield
    for _, document, _ in DOCUMENTS:
        snippets._teardown_page(document.namespace)


def test_the_pages_have_blocks_for_this_tier():
    assert BLOCKS, "no block of the documentation is marked <!-- docs: megatron -->"


@pytest.mark.parametrize(
    "document, example", BLOCKS,
    ids=[f"{snippets.Path(example.path).relative_to(snippets.REPO)}:{example.line}"
         for _, example in BLOCKS])
def test_block(document, example):
    example.evaluate()
