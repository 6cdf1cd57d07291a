"""`benchbuild report`: the tables, figures and HTML page written over evaluated run folders.

`runs` reads the run folders, `headline` picks each benchmark's headline numbers, `latex`, `figures` and `html`
write one format each, and `write.write_report` puts them together (the Markdown and CSV tables come from
`benchbuild.evaluation.report`). matplotlib is imported only inside the figure functions.
"""
