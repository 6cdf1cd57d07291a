"""`benchbuild report`: every table, figure and page written over evaluated run folders; evaluation computes the
metrics, this package alone shows them.

`runs` reads the run folders, `rows` groups their evaluations into the report's rows (model × benchmark split ×
metric, over seeds, with the paper's number) and `protocol` says whether each row's runs were made as the paper's
number was (only then is it set beside ours), `headline` picks each benchmark's headline numbers, `markdown`,
`csv_table`, `latex`, `figures` and `html` write one format each (`grid` adds a hyperparameter grid's tables), and
`write.write_report` puts them together. matplotlib is imported only inside the figure functions.
"""
