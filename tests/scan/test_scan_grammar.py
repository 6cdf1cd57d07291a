"""The SCAN grammar generates exactly the canonical command set with the canonical actions."""

import pytest

from benchbuild.scan.grammar import ACTIONS, generate, generate_commands, interpret


def test_grammar_generates_20910_distinct_commands():
    commands = generate_commands()
    assert len(commands) == 20_910
    assert len(set(commands)) == 20_910


@pytest.mark.parametrize("command, actions", [
    ("jump", "I_JUMP"),
    ("jump left", "I_TURN_LEFT I_JUMP"),
    ("jump around right", "I_TURN_RIGHT I_JUMP I_TURN_RIGHT I_JUMP I_TURN_RIGHT I_JUMP I_TURN_RIGHT I_JUMP"),
    ("turn left twice", "I_TURN_LEFT I_TURN_LEFT"),
    ("jump thrice", "I_JUMP I_JUMP I_JUMP"),
    ("jump opposite left and walk thrice", "I_TURN_LEFT I_TURN_LEFT I_JUMP I_WALK I_WALK I_WALK"),
    ("jump opposite left after walk around left",
     "I_TURN_LEFT I_WALK I_TURN_LEFT I_WALK I_TURN_LEFT I_WALK I_TURN_LEFT I_WALK I_TURN_LEFT I_TURN_LEFT I_JUMP"),
    ("turn around right", "I_TURN_RIGHT I_TURN_RIGHT I_TURN_RIGHT I_TURN_RIGHT"),
    ("turn opposite left", "I_TURN_LEFT I_TURN_LEFT"),
])
def test_interpretation_matches_figure_3_and_5(command, actions):
    assert interpret(command) == actions


def test_action_vocabulary_is_the_canonical_one():
    used = {action for example in generate() for action in example.actions.split()}
    assert used == set(ACTIONS)


@pytest.mark.shared
def test_generated_set_equals_canonical_tasks_file(shared_data):
    canonical = set()
    for line in (shared_data / "scan" / "tasks.txt").read_text().splitlines():
        command, actions = line[len("IN: "):].split(" OUT: ")
        canonical.add((command, actions))
    assert {(e.command, e.actions) for e in generate()} == canonical
