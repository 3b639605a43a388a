// Sequential executor (being written).
