select range as id from range(4)
