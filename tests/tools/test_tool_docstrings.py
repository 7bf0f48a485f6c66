"""Tool descriptions from Google-style docstrings."""

from __future__ import annotations

from graph_agent.tools import Tool, tool


def test_the_description_is_the_docstring_before_its_sections() -> None:
    def lookup(city: str) -> str:
        """Look up the weather.

        Uses the national service; results are cached for ten minutes.

        Args:
            city: Which city.

        Returns:
            A short report.
        """
        return city

    assert Tool.from_function(lookup).description == (
        "Look up the weather.\n\nUses the national service; results are cached for ten minutes."
    )


def test_args_entries_become_parameter_descriptions() -> None:
    @tool
    def book(city: str, nights: int = 1, *, breakfast: bool = False) -> str:
        """Book a hotel.

        Args:
            city (str): Where to stay.
            nights: How many nights,
                counted from tonight.
            breakfast: Whether breakfast is included.
        """
        return city

    properties = book.parameters["properties"]
    assert properties["city"]["description"] == "Where to stay."
    assert properties["nights"]["description"] == "How many nights, counted from tonight."
    assert properties["breakfast"]["description"] == "Whether breakfast is included."


def test_sections_after_args_do_not_leak_into_descriptions() -> None:
    @tool
    def f(a: int) -> int:
        """Do f.

        Args:
            a: The a.

        Raises:
            ValueError: never.
        """
        return a

    assert f.parameters["properties"]["a"]["description"] == "The a."
    assert f.description == "Do f."


def test_an_explicit_description_replaces_the_docstring() -> None:
    @tool(description="Say hi.")
    def hello() -> str:
        """Long text nobody should see."""
        return "hi"

    assert hello.description == "Say hi."


def test_a_function_without_a_docstring_has_an_empty_description() -> None:
    def bare(x: int) -> int:
        return x

    made = Tool.from_function(bare)
    assert made.description == ""
    assert "description" not in made.parameters["properties"]["x"]


def test_args_naming_unknown_parameters_are_ignored() -> None:
    def f(a: int) -> int:
        """Do f.

        Args:
            a: The a.
            b: Not a parameter.
        """
        return a

    assert list(Tool.from_function(f).parameters["properties"]) == ["a"]
