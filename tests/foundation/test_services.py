"""The test servers are real: PostgreSQL answers SQL, moto S3 stores objects over HTTP."""

import psycopg


def test_postgres_server_answers_sql(postgres_server, pg_database):
    with psycopg.connect(postgres_server.dsn(pg_database)) as conn:
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("INSERT INTO t VALUES (41), (1)")
        assert conn.execute("SELECT sum(x) FROM t").fetchone()[0] == 42


def test_s3_server_stores_objects_over_http(s3_server, s3_bucket):
    client = s3_server.client()
    client.put_object(Bucket=s3_bucket, Key="a/b.txt", Body=b"hello")
    assert s3_server.keys(s3_bucket) == ["a/b.txt"]
    assert client.get_object(Bucket=s3_bucket, Key="a/b.txt")["Body"].read() == b"hello"
    assert s3_server.endpoint_url.startswith("http://127.0.0.1:")
