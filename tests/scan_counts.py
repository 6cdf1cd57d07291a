"""Row counts of SCAN splittings that tests check builds against, each with where it comes from: a line count of a
canonical file of the SCAN repository (github.com/brendenlake/SCAN, copied to ../shared/data/scan;
tests/scan/test_scan_splits.py checks these against the files) or a paper's table."""

COMMANDS = 20_910  # lines of tasks.txt: every command the grammar generates (Lake & Baroni 2018)
SIMPLE = {"train": 16_728, "test": 4_182}  # lines of simple_split/tasks_{train,test}_simple.txt (80% / 20%)
ADDPRIM_JUMP_TEST = 7_706  # lines of add_prim_split/tasks_test_addprim_jump.txt
# Lines "IN: jump OUT: I_JUMP" of add_prim_split/tasks_train_addprim_jump.txt: the bare primitive, repeated.
ADDPRIM_JUMP_BARE_REPEATS = 1_467
TEMPLATE_JUMP_AROUND_RIGHT_TEST = 1_173  # lines of template_split/tasks_test_template_jump_around_right.txt
# 003 Table 10, row "Scan (length cutoff=26)": # train, # IID valid., # gen. test.
LENGTH_CUTOFF_26 = {"train": 16_458, "validation": 1_828, "test": 2_624}

# The files behind each count above that comes from the repository.
CANONICAL_FILES = {
    "tasks.txt": COMMANDS,
    "simple_split/tasks_train_simple.txt": SIMPLE["train"],
    "simple_split/tasks_test_simple.txt": SIMPLE["test"],
    "add_prim_split/tasks_test_addprim_jump.txt": ADDPRIM_JUMP_TEST,
    "template_split/tasks_test_template_jump_around_right.txt": TEMPLATE_JUMP_AROUND_RIGHT_TEST,
}
