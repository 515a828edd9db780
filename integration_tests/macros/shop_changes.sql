{#
  Some business on the shop's masters, for the demo: new orders, a status change, a customer
  moving country (the join key of the join view does not change, its columns do), a cancelled
  order removed, a product recategorised and the unknown product 99 of an order line added (so
  the outer-join view's null-extended line gains its first match).

    dbt run-operation shop_changes
#}
{% macro shop_changes() %}
  {% set statements = [
    "insert into " ~ ref('orders') ~ " values (112, 2, date'2026-03-20', 'open'), (113, 6, date'2026-03-21', 'shipped'), (114, 5, date'2026-03-22', 'open')",
    "insert into " ~ ref('order_lines') ~ " values (112, 1, 11, 3, 19.90), (113, 1, 12, 1, 199.00)",
    "update " ~ ref('orders') ~ " set status = 'shipped' where order_id = 104",
    "update " ~ ref('customers') ~ " set country = 'DE' where customer_id = 4",
    "delete from " ~ ref('orders') ~ " where order_id = 102",
    "update " ~ ref('products') ~ " set category = 'peripherals' where product_id = 11",
    "insert into " ~ ref('products') ~ " values (99, 'Sticker', 'merch', 5.00)",
  ] %}
  {% for statement in statements %}
    {% do run_query(statement) %}
  {% endfor %}
  {{ log("shop_changes: 3 orders and 2 order lines added, 1 order shipped, 1 customer moved, 1 order deleted, 1 product changed, 1 added", info=True) }}
{% endmacro %}
