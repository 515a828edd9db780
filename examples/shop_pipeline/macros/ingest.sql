{#
  The ingestion, standing in for your loader: batch 1 creates the raw tables and loads them;
  every later batch inserts, updates and deletes rows, as a day of business would.

    dbt run-operation ingest --args '{batch: 1}'
    dbt run-operation ingest --args '{batch: 2}'
#}
{% macro ingest(batch) %}
  {%- set b = batch | int -%}
  {%- if b == 1 -%}
    {% do run_query("create schema if not exists raw") %}
    {% do run_query("create or replace table raw.customers (customer_id bigint, name string, email string, country string, updated_at timestamp) using iceberg") %}
    {% do run_query("create or replace table raw.orders (order_id bigint, customer_id bigint, status string, amount decimal(12,2), ordered_at timestamp) using iceberg") %}
    {% do run_query("create or replace table raw.payments (payment_id bigint, order_id bigint, method string, amount decimal(12,2)) using iceberg") %}
    {% do run_query("insert into raw.customers select id, concat('customer ', id), concat(' Customer', id, '@Example.com '), element_at(array('FR', 'DE', 'US', 'JP'), cast(id % 4 + 1 as int)), timestamp'2026-01-01 00:00:00' from range(1, 201) as t(id)") %}
    {% do run_query("insert into raw.orders select id, id % 200 + 1, element_at(array('placed', 'shipped', 'delivered', 'returned', 'test'), cast(id % 5 + 1 as int)), cast(id % 97 + 0.99 as decimal(12,2)), timestamp'2026-01-01 00:00:00' + make_interval(0, 0, 0, cast(id % 300 as int)) from range(1, 2001) as t(id)") %}
    {% do run_query("insert into raw.payments select id, id, element_at(array('card', 'transfer', 'voucher'), cast(id % 3 + 1 as int)), cast(id % 97 + 0.99 as decimal(12,2)) from range(1, 2001) as t(id) where id % 7 <> 0") %}
    {{ log("ingest: batch 1 loaded: 200 customers, 2,000 orders, 1,714 payments", info=True) }}
  {%- else -%}
    {%- set first = 2000 + (b - 2) * 20 + 1 -%}
    {% do run_query("insert into raw.orders select id, id % 200 + 1, 'placed', cast(id % 89 + 5.00 as decimal(12,2)), timestamp'2026-12-01 00:00:00' from range(" ~ first ~ ", " ~ (first + 20) ~ ") as t(id)") %}
    {% do run_query("insert into raw.payments select id, id, 'card', cast(id % 89 + 5.00 as decimal(12,2)) from range(" ~ first ~ ", " ~ (first + 15) ~ ") as t(id)") %}
    {% do run_query("update raw.orders set status = 'shipped' where status = 'placed' and order_id % 50 = " ~ (5 * (b % 10))) %}
    {% do run_query("delete from raw.orders where status = 'returned' and order_id % 100 = " ~ (3 + 5 * (b % 20))) %}
    {% do run_query("update raw.customers set country = 'IT', updated_at = timestamp'2026-12-01 00:00:00' + make_interval(0, 0, 0, " ~ b ~ ") where customer_id % 40 = " ~ (b % 40)) %}
    {{ log("ingest: batch " ~ b ~ ": 20 orders and 15 payments added, orders shipped and returned ones removed, customers moved", info=True) }}
  {%- endif -%}
{% endmacro %}
