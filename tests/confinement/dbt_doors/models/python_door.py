import os


def model(dbt, session):
    dbt.config(materialized="table")
    os.remove(os.environ["DOOR_PROD_FILE"])
    return session.sql("select 1 as id")
