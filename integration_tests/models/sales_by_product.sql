-- Aggregate view over one master: sales per product (NULL product ids form their own group).
select product_id,
       count(*) as line_count,
       count(quantity) as lines_with_quantity,
       sum(quantity) as units,
       sum(quantity * unit_price) as revenue,
       avg(unit_price) as avg_unit_price,
       min(unit_price) as min_unit_price,
       max(unit_price) as max_unit_price
from {{ ref('order_lines') }}
group by product_id
