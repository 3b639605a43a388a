// Session (being written).
